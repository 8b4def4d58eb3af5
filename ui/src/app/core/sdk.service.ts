import { Injectable, signal } from '@angular/core';

// The part of the vSphere Client's htmlClientSdk (remote plugin SDK, API
// 1.1.0) the UI uses. The client injects it at /api/ui/htmlClientSdk.js
// on its own origin, which is the UI's origin through the reverse proxy.
export interface HtmlClientSdk {
  initialize(cb: () => void): void;
  app: {
    getSessionInfo(cb: (info: { sessionToken: string }) => void): void;
    getContextObjects?(): { id: string; name?: string }[];
    getTheme?(): { name: string };
    navigateTo?(opts: { targetViewId?: string; objectId?: string; customData?: unknown }): void;
  };
  event?: { onThemeChanged?(cb: (theme: { name: string }) => void): void };
  modal?: { open?(opts: unknown): void; close?(data?: unknown): void };
}

declare global {
  interface Window {
    htmlClientSdk?: HtmlClientSdk;
  }
}

// ContextObject is the vSphere object the view was opened on, from its
// id "urn:vmomi:<Type>:<moref>:<vCenter uuid>".
export interface ContextObject {
  type: string;
  moref: string;
  name?: string;
}

export function parseContextId(id: string, name?: string): ContextObject | null {
  const m = /^urn:vmomi:([A-Za-z]+):([^:]+):/.exec(id);
  return m ? { type: m[1], moref: m[2], name } : null;
}

export const SDK_URL = '/api/ui/htmlClientSdk.js';

// SdkService wraps htmlClientSdk when the UI runs in the vSphere Client.
@Injectable({ providedIn: 'root' })
export class SdkService {
  sdk: HtmlClientSdk | null = null;
  readonly theme = signal<'light' | 'dark'>('light');

  get embedded(): boolean {
    return this.sdk !== null;
  }

  // load fetches the client's SDK script when the UI is in a frame; it
  // resolves with null when standalone or when the script is not there.
  async load(win: Window = window): Promise<HtmlClientSdk | null> {
    if (win.parent === win) {
      return null;
    }
    if (!win.htmlClientSdk) {
      await new Promise<void>((resolve) => {
        const s = win.document.createElement('script');
        s.src = SDK_URL;
        s.onload = () => resolve();
        s.onerror = () => resolve();
        win.document.head.appendChild(s);
      });
    }
    const sdk = win.htmlClientSdk;
    if (!sdk) {
      return null;
    }
    await new Promise<void>((resolve) => sdk.initialize(resolve));
    this.sdk = sdk;
    this.applyTheme(sdk.app.getTheme?.().name);
    sdk.event?.onThemeChanged?.((t) => this.applyTheme(t.name));
    return sdk;
  }

  sessionToken(): Promise<string> {
    const sdk = this.sdk;
    if (!sdk) {
      return Promise.reject(new Error('not inside the vSphere Client'));
    }
    return new Promise((resolve) => sdk.app.getSessionInfo((i) => resolve(i.sessionToken)));
  }

  contextObject(): ContextObject | null {
    const o = this.sdk?.app.getContextObjects?.()?.[0];
    return o ? parseContextId(o.id, o.name) : null;
  }

  applyTheme(name: string | undefined): void {
    const t = name === 'dark' ? 'dark' : 'light';
    this.theme.set(t);
    document.body.setAttribute('cds-theme', t);
  }

  navigateTo(viewId: string, objectId?: string): void {
    this.sdk?.app.navigateTo?.({ targetViewId: viewId, objectId });
  }
}
