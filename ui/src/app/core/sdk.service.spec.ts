import { SdkService, parseContextId } from './sdk.service';
import { declaredViews, routes } from '../app.routes';

describe('parseContextId', () => {
  it('reads the type and moref of a vSphere object id', () => {
    expect(parseContextId('urn:vmomi:HostSystem:host-21:1f2e-uuid')).toEqual({ type: 'HostSystem', moref: 'host-21', name: undefined });
    expect(parseContextId('nonsense')).toBeNull();
  });
});

describe('SdkService', () => {
  it('is standalone when not framed', async () => {
    const s = new SdkService();
    expect(await s.load(window)).toBeNull();
    expect(s.embedded).toBe(false);
  });

  it('uses the client SDK in a frame: session token, context object, theme', async () => {
    const themed: ((t: { name: string }) => void)[] = [];
    const fake = {
      parent: {},
      document,
      htmlClientSdk: {
        initialize: (cb: () => void) => cb(),
        app: {
          getSessionInfo: (cb: (i: { sessionToken: string }) => void) => cb({ sessionToken: 'tok' }),
          getContextObjects: () => [{ id: 'urn:vmomi:ClusterComputeResource:domain-c7:x' }],
          getTheme: () => ({ name: 'dark' }),
        },
        event: { onThemeChanged: (cb: (t: { name: string }) => void) => themed.push(cb) },
      },
    } as unknown as Window;
    const s = new SdkService();
    expect(await s.load(fake)).not.toBeNull();
    expect(await s.sessionToken()).toBe('tok');
    expect(s.contextObject()?.moref).toBe('domain-c7');
    expect(s.theme()).toBe('dark');
    expect(document.body.getAttribute('cds-theme')).toBe('dark');
    themed[0]({ name: 'light' });
    expect(s.theme()).toBe('light');
  });
});

describe('routes', () => {
  it('serve every view plugin.json declares', () => {
    const paths = routes.map((r) => r.path);
    for (const v of declaredViews) {
      expect(paths).toContain(v);
    }
    expect(declaredViews.length).toBe(5);
  });
});
