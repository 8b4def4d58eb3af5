import { ApplicationConfig, inject, provideAppInitializer, provideZoneChangeDetection } from '@angular/core';
import { provideAnimations } from '@angular/platform-browser/animations';
import { provideRouter, withHashLocation } from '@angular/router';
import { routes } from './app.routes';
import { ApiService } from './core/api.service';
import { SdkService } from './core/sdk.service';

// Inside the vSphere Client, sign in with the client's session token
// before the first view loads; standalone, the login page does it.
async function connect(): Promise<void> {
  const sdk = inject(SdkService);
  const api = inject(ApiService);
  if (await sdk.load()) {
    api.token = await sdk.sessionToken();
  } else {
    sdk.applyTheme(window.matchMedia?.('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  }
}

export const appConfig: ApplicationConfig = {
  providers: [
    provideZoneChangeDetection({ eventCoalescing: true }),
    provideAnimations(),
    // Hash routing: every view is index.html#/<route>, an asset that
    // exists whatever path vCenter's reverse proxy serves the UI under.
    provideRouter(routes, withHashLocation()),
    provideAppInitializer(connect),
  ],
};
