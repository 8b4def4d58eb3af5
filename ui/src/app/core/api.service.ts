import { Injectable, signal } from '@angular/core';
import {
  Inventory,
  Job,
  MaintenanceRequest,
  Plan,
  ProgressEvent,
  StatKind,
  Statistics,
  SystemView,
  Validation,
  Volume,
  VolumeQoS,
  VolumeRequest,
  VolumeAccess,
  DeviceAddRequest,
  SDSDisks,
  StopPlan,
  UpgradeBundles,
  UpgradeRequest,
  UpgradeSVMs,
  UploadedBundle,
  UpgradeStop,
} from './types';

// ApiError is a failed call, with the server's own message (which says
// what to do next) and the HTTP status.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// The headers the plugin server reads (internal/server: TokenHeader,
// RequestHeader).
export const TOKEN_HEADER = 'X-Cairn-Session-Token';
export const REQUEST_HEADER = 'X-Cairn-Request';

// apiBase is where the plugin server's /api/v1 is, seen from a page at
// location: the UI is served at <server>/ui/, standalone or through the
// vSphere Client's reverse proxy (<vcenter>/<proxied base>/ui/), so the
// API is the same path without /ui/.
export function apiBase(location: { origin: string; pathname: string }): string {
  const i = location.pathname.lastIndexOf('/ui/');
  const prefix = i >= 0 ? location.pathname.slice(0, i) : '';
  return location.origin + prefix + '/api/v1';
}

// Fetch is the subset of window.fetch the service uses (tests give a fake).
export type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

// answer is a response's JSON, or the ApiError its status and body say.
function answer<T>(method: string, path: string, status: number, text: string): T {
  let data: unknown = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
  }
  if (status < 200 || status > 299) {
    const msg = data && typeof data === 'object' && 'error' in data ? String((data as { error: unknown }).error) : `${method} ${path} failed: HTTP ${status}`;
    throw new ApiError(status, msg);
  }
  return data as T;
}

// ApiService is the one typed client of the plugin server's API.
@Injectable({ providedIn: 'root' })
export class ApiService {
  base = apiBase(window.location);
  // The vSphere Client's session token when running inside the client;
  // null standalone (the session cookie is used).
  token: string | null = null;
  readonly user = signal<string | null>(null);
  fetchFn: Fetch = (input, init) => window.fetch(input, init);

  private headers(json: boolean): Record<string, string> {
    const h: Record<string, string> = { Accept: 'application/json', [REQUEST_HEADER]: '1' };
    if (json) {
      h['Content-Type'] = 'application/json';
    }
    if (this.token) {
      h[TOKEN_HEADER] = this.token;
    }
    return h;
  }

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let resp: Response;
    try {
      resp = await this.fetchFn(this.base + path, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'include',
      });
    } catch {
      throw new ApiError(
        0,
        `The Cairn plugin server (${this.base}) did not answer: check that cairn-plugin is running and reachable, then retry.`,
      );
    }
    return answer<T>(method, path, resp.status, await resp.text());
  }

  // uploadBundle sends an update bundle file to the system's gateway
  // through the plugin server, telling progress(sent, total) as the bytes
  // go (fetch cannot tell an upload's progress; XMLHttpRequest can).
  uploadBundle(system: string, file: Blob, progress: (sent: number, total: number) => void): Promise<UploadedBundle> {
    const path = `/systems/${encodeURIComponent(system)}/upgrade/bundles`;
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', this.base + path);
      xhr.withCredentials = true;
      for (const [k, v] of Object.entries({ ...this.headers(false), 'Content-Type': 'application/gzip' })) {
        xhr.setRequestHeader(k, v);
      }
      xhr.upload.onprogress = (e) => progress(e.loaded, e.lengthComputable ? e.total : file.size);
      xhr.onload = () => {
        try {
          resolve(answer<UploadedBundle>('POST', path, xhr.status, xhr.responseText));
        } catch (e) {
          reject(e);
        }
      };
      xhr.onerror = () =>
        reject(new ApiError(0, `The upload to the Cairn plugin server (${this.base}) broke off: check that cairn-plugin is running and reachable, then upload the bundle again.`));
      xhr.send(file);
    });
  }

  async login(username: string, password: string): Promise<string> {
    const r = await this.call<{ user: string }>('POST', '/session', { username, password });
    this.user.set(r.user);
    return r.user;
  }

  async logout(): Promise<void> {
    await this.call<unknown>('DELETE', '/session');
    this.user.set(null);
  }

  inventory(): Promise<Inventory> {
    return this.call('GET', '/inventory');
  }

  suggest(req: { datacenter: string; system: string; template: string; svm_cidr: string; iscsi_cidr: string }): Promise<Plan> {
    return this.call('POST', '/plan/suggest', req);
  }

  validate(p: Plan): Promise<Validation> {
    return this.call('POST', '/plan/validate', p);
  }

  deploy(p: Plan): Promise<Job> {
    return this.call('POST', '/deploy', p);
  }

  jobs(): Promise<Job[]> {
    return this.call('GET', '/jobs');
  }

  systems(): Promise<SystemView[]> {
    return this.call('GET', '/systems');
  }

  createVolume(req: VolumeRequest): Promise<Job> {
    return this.call('POST', '/volumes', req);
  }

  // setVolumeQoS changes a volume's limits, live (the gateway's reason
  // comes back as the ApiError's message when it refuses a value).
  setVolumeQoS(system: string, volume: string, qos: VolumeQoS): Promise<Volume> {
    return this.call('PATCH', `/systems/${encodeURIComponent(system)}/volumes/${encodeURIComponent(volume)}`, qos);
  }

  // growVolume grows a volume and its VMFS datastore on every host (a job).
  growVolume(system: string, volume: string, sizeGiB: number): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/volumes/${encodeURIComponent(volume)}/grow`, { size_gib: sizeGiB });
  }

  // mapVolume maps a volume to ESXi hosts (a job: map, rescan, mount).
  mapVolume(system: string, volume: string, hosts: string[], access: VolumeAccess): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/volumes/${encodeURIComponent(volume)}/map`, { hosts, access });
  }

  // unmapVolume unmaps a volume from ESXi hosts (a job: unmount the
  // datastore, detach the LUN, unmap, rescan).
  unmapVolume(system: string, volume: string, hosts: string[]): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/volumes/${encodeURIComponent(volume)}/unmap`, { hosts });
  }

  // deleteVolume deletes a volume, its datastore and its data (a job);
  // confirm is the volume's name as the admin typed it.
  deleteVolume(system: string, volume: string, confirm: string): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/volumes/${encodeURIComponent(volume)}/delete`, { confirm });
  }

  startMaintenance(system: string, req: MaintenanceRequest): Promise<Job> {
    return this.call('POST', `/maintenance/${encodeURIComponent(system)}`, req);
  }

  async continueMaintenance(system: string): Promise<void> {
    await this.call<unknown>('POST', `/maintenance/${encodeURIComponent(system)}/continue`);
  }

  // statistics reads the I/O statistics of the system or of one of its
  // pools, volumes or SDSs (kind 'system' takes no name).
  statistics(system: string, kind: StatKind, name?: string): Promise<Statistics> {
    const q = new URLSearchParams({ kind });
    if (kind !== 'system' && name) {
      q.set('name', name);
    }
    return this.call('GET', `/systems/${encodeURIComponent(system)}/statistics?${q}`);
  }

  // stopMaintenance asks the running roll to stop safely; the answer says
  // what it will do (the host it is on comes back first).
  stopMaintenance(system: string): Promise<StopPlan> {
    return this.call('POST', `/maintenance/${encodeURIComponent(system)}/stop`);
  }

  // upgradeBundles lists the update bundles stored on the system's gateway.
  upgradeBundles(system: string): Promise<UpgradeBundles> {
    return this.call('GET', `/systems/${encodeURIComponent(system)}/upgrade/bundles`);
  }

  // upgradeSVMs lists each SVM's updater (running and ordered version, state).
  upgradeSVMs(system: string): Promise<UpgradeSVMs> {
    return this.call('GET', `/systems/${encodeURIComponent(system)}/upgrade/svms`);
  }

  // startUpgrade rolls the system's SVMs to a stored bundle's version (a
  // job); sent again after a failure or a stop, it goes on.
  startUpgrade(system: string, req: UpgradeRequest): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/upgrade`, req);
  }

  // stopUpgrade ends the running roll after the SVM unit it is on.
  stopUpgrade(system: string): Promise<UpgradeStop> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/upgrade/stop`);
  }

  // sdsDisks lists the disks an SDS's SVM could take, with why not.
  sdsDisks(system: string, sds: string): Promise<SDSDisks> {
    return this.call('GET', `/systems/${encodeURIComponent(system)}/sds/${encodeURIComponent(sds)}/disks`);
  }

  // addDevice attaches the disk to the SVM if needed and adds it (a job).
  addDevice(system: string, req: DeviceAddRequest): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/devices`, req);
  }

  // removeDevice drains a device, then it is deleted (a job with progress).
  removeDevice(system: string, device: string): Promise<Job> {
    return this.call('POST', `/systems/${encodeURIComponent(system)}/devices/${encodeURIComponent(device)}/remove`);
  }

  // events streams job progress (server-sent events over fetch, so the
  // session token header goes along; EventSource cannot send headers).
  // It resolves when signal aborts or the server ends the stream.
  async events(job: string, after: number, onEvent: (e: ProgressEvent) => void, abort: AbortSignal): Promise<void> {
    const q = new URLSearchParams({ after: String(after) });
    if (job) {
      q.set('job', job);
    }
    let resp: Response;
    try {
      resp = await this.fetchFn(`${this.base}/events?${q}`, {
        headers: { ...this.headers(false), Accept: 'text/event-stream' },
        credentials: 'include',
        signal: abort,
      });
    } catch (e) {
      if (abort.aborted) {
        return;
      }
      throw new ApiError(0, `The progress stream did not open (${String(e)}): check the plugin server, then reload.`);
    }
    if (!resp.ok || !resp.body) {
      throw new ApiError(resp.status, `The progress stream was refused: HTTP ${resp.status}`);
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          return;
        }
        buf += dec.decode(value, { stream: true });
        buf = parseSSE(buf, onEvent);
      }
    } catch (e) {
      if (!abort.aborted) {
        throw e;
      }
    }
  }
}

// parseSSE hands every complete event in buf to onEvent and returns the
// incomplete rest. Only "data:" lines matter (the id repeats seq).
export function parseSSE(buf: string, onEvent: (e: ProgressEvent) => void): string {
  let i: number;
  while ((i = buf.indexOf('\n\n')) >= 0) {
    const block = buf.slice(0, i);
    buf = buf.slice(i + 2);
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n');
    if (data) {
      try {
        onEvent(JSON.parse(data) as ProgressEvent);
      } catch {
        // a malformed event is skipped, the stream goes on
      }
    }
  }
  return buf;
}
