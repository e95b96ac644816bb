/**
 * Whether this process traces: only when an OTLP endpoint is configured through the standard variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
 * nor OTEL_TRACES_EXPORTER=none says otherwise. Otherwise the OpenTelemetry SDK is not even loaded, and no
 * hook is added to the request path: tracing off costs nothing.
 */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return (
    Boolean(endpoint?.trim()) &&
    env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true' &&
    env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() !== 'none'
  );
}
