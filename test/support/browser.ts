import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium (playwright's own browser download cannot run here), headless and offline-quiet. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Nothing of these is what the docs page is tested for; each costs the browser CPU in the suite.
      '--disable-extensions',
      '--disable-features=Translate,OptimizationHints,MediaRouter',
      '--mute-audio',
      '--disable-dev-shm-usage',
    ],
  });
}
