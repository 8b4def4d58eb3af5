import { ApiError, ApiService, REQUEST_HEADER, TOKEN_HEADER, apiBase, parseSSE } from './api.service';
import { ProgressEvent } from './types';

function fakeFetch(status: number, body: string, seen: { url?: string; init?: RequestInit }[]) {
  return async (url: string, init?: RequestInit) => {
    seen.push({ url, init });
    return new Response(body, { status, headers: { 'Content-Type': 'application/json' } });
  };
}

describe('apiBase', () => {
  it('is the server root standalone', () => {
    expect(apiBase({ origin: 'https://plugin:9443', pathname: '/ui/index.html' })).toBe('https://plugin:9443/api/v1');
  });
  it('keeps the vSphere Client proxy prefix', () => {
    expect(apiBase({ origin: 'https://vc.example', pathname: '/ui/remote-plugins/com.cairn.vcenter/0.1.0/x/ui/index.html' })).toBe(
      'https://vc.example/ui/remote-plugins/com.cairn.vcenter/0.1.0/x/api/v1',
    );
  });
});

describe('ApiService', () => {
  it('sends the session token and the request header inside the client', async () => {
    const api = new ApiService();
    const seen: { url?: string; init?: RequestInit }[] = [];
    api.base = 'https://p/api/v1';
    api.token = 'tok-1';
    api.fetchFn = fakeFetch(200, '{"valid":true,"problems":[]}', seen);
    const v = await api.validate({} as never);
    expect(v.valid).toBe(true);
    const h = seen[0].init?.headers as Record<string, string>;
    expect(seen[0].url).toBe('https://p/api/v1/plan/validate');
    expect(h[TOKEN_HEADER]).toBe('tok-1');
    expect(h[REQUEST_HEADER]).toBe('1');
    expect(seen[0].init?.method).toBe('POST');
  });

  it('sends no token header standalone', async () => {
    const api = new ApiService();
    const seen: { url?: string; init?: RequestInit }[] = [];
    api.fetchFn = fakeFetch(200, '[]', seen);
    await api.jobs();
    expect((seen[0].init?.headers as Record<string, string>)[TOKEN_HEADER]).toBeUndefined();
  });

  it("keeps the server's error message and status", async () => {
    const api = new ApiService();
    api.fetchFn = fakeFetch(409, '{"error":"job deploy:cairn1 is already running"}', []);
    await expect(api.deploy({} as never)).rejects.toEqual(new ApiError(409, 'job deploy:cairn1 is already running'));
  });

  it('says what to do when the server does not answer', async () => {
    const api = new ApiService();
    api.fetchFn = () => Promise.reject(new TypeError('Failed to fetch'));
    await expect(api.jobs()).rejects.toThrow(/check that cairn-plugin is running/);
  });

  it('records the signed-in user', async () => {
    const api = new ApiService();
    api.fetchFn = fakeFetch(200, '{"user":"admin@vsphere.local"}', []);
    await api.login('admin@vsphere.local', 'pw');
    expect(api.user()).toBe('admin@vsphere.local');
  });
});

describe('parseSSE', () => {
  it('hands complete events on and keeps the rest', () => {
    const got: ProgressEvent[] = [];
    const rest = parseSSE(
      'id: 1\nevent: progress\ndata: {"seq":1,"job":"deploy:a","message":"m1"}\n\n: keepalive\n\nid: 2\ndata: {"seq":2',
      (e) => got.push(e),
    );
    expect(got.map((e) => e.seq)).toEqual([1]);
    expect(rest).toBe('id: 2\ndata: {"seq":2');
    parseSSE(rest + ',"job":"x","message":"m2"}\n\n', (e) => got.push(e));
    expect(got.map((e) => e.seq)).toEqual([1, 2]);
  });
  it('skips a malformed event', () => {
    const got: ProgressEvent[] = [];
    parseSSE('data: {nope\n\ndata: {"seq":3}\n\n', (e) => got.push(e));
    expect(got.map((e) => e.seq)).toEqual([3]);
  });
});
