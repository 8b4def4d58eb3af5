import { Injectable, OnDestroy, inject, signal } from '@angular/core';
import { ApiError, ApiService } from './api.service';
import { Job, ProgressEvent, SystemView } from './types';

// StoreService keeps what the screens share: the systems, the jobs and
// the recent progress events, refreshed while a screen watches them.
@Injectable({ providedIn: 'root' })
export class StoreService implements OnDestroy {
  private api = inject(ApiService);
  readonly systems = signal<SystemView[] | null>(null);
  readonly jobs = signal<Job[]>([]);
  readonly events = signal<ProgressEvent[]>([]);
  readonly error = signal<string | null>(null);
  private timer: ReturnType<typeof setInterval> | null = null;
  private watchers = 0;
  private stream: AbortController | null = null;
  private lastSeq = 0;

  async refresh(): Promise<void> {
    try {
      const [systems, jobs] = await Promise.all([this.api.systems(), this.api.jobs()]);
      this.systems.set(systems);
      this.jobs.set(jobs);
      this.error.set(null);
    } catch (e) {
      this.error.set(e instanceof ApiError ? e.message : String(e));
    }
  }

  // watch refreshes every intervalMs and follows the event stream until
  // every watcher has called the returned stop.
  watch(intervalMs = 3000): () => void {
    this.watchers++;
    if (this.watchers === 1) {
      void this.refresh();
      this.timer = setInterval(() => void this.refresh(), intervalMs);
      this.follow();
    }
    let stopped = false;
    return () => {
      if (stopped) {
        return;
      }
      stopped = true;
      this.watchers--;
      if (this.watchers === 0) {
        if (this.timer) {
          clearInterval(this.timer);
        }
        this.timer = null;
        this.stream?.abort();
        this.stream = null;
      }
    };
  }

  private follow(): void {
    const ctl = new AbortController();
    this.stream = ctl;
    this.api
      .events('', this.lastSeq, (e) => {
        this.lastSeq = Math.max(this.lastSeq, e.seq);
        this.events.update((l) => [...l.slice(-499), e]);
      }, ctl.signal)
      .catch((e: unknown) => this.error.set(e instanceof Error ? e.message : String(e)))
      .finally(() => {
        // The server closed the stream (restart): follow again shortly.
        if (this.stream === ctl && !ctl.signal.aborted) {
          setTimeout(() => this.stream === ctl && this.follow(), 2000);
        }
      });
  }

  job(name: string): Job | undefined {
    return this.jobs().find((j) => j.name === name);
  }

  ngOnDestroy(): void {
    this.stream?.abort();
    if (this.timer) {
      clearInterval(this.timer);
    }
  }
}
