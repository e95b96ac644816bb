// Preloaded (NODE_OPTIONS=--require) into a service process by the tracing tests: when it exits, it says
// on stderr how many OpenTelemetry SDK modules it had loaded, so a test can tell the SDK was never loaded.
process.on('exit', () => {
  const loaded = Object.keys(require.cache).filter((path) =>
    /[\\/]@opentelemetry[\\/](sdk-|exporter-|otlp-|resources)/.test(path),
  );
  process.stderr.write(`opentelemetry sdk modules loaded: ${loaded.length}\n`);
});
