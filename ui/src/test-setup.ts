// TestBed in JIT mode for the component tests (vitest has no Angular
// compiler plugin): the compiler compiles templates and Clarity's partial
// declarations at run time.
import '@angular/compiler';
import 'zone.js';
import 'zone.js/testing';
import { getTestBed } from '@angular/core/testing';
import { BrowserTestingModule, platformBrowserTesting } from '@angular/platform-browser/testing';

getTestBed().initTestEnvironment(BrowserTestingModule, platformBrowserTesting(), { teardown: { destroyAfterEach: true } });

// jsdom has no layout, hence no ResizeObserver or IntersectionObserver
// (Clarity's modal and datagrid observe their size and visibility):
// observers that never fire.
class NoLayoutObserver {
  observe(): void {
    // no layout in jsdom: nothing ever changes
  }
  unobserve(): void {
    // nothing observed
  }
  disconnect(): void {
    // nothing observed
  }
  takeRecords(): [] {
    return [];
  }
}
for (const name of ['ResizeObserver', 'IntersectionObserver']) {
  if (!(name in globalThis)) {
    (globalThis as unknown as Record<string, unknown>)[name] = NoLayoutObserver;
  }
}
