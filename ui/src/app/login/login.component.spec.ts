import { TestBed } from '@angular/core/testing';
import { provideNoopAnimations } from '@angular/platform-browser/animations';
import { provideRouter, Router } from '@angular/router';
import { ApiService } from '../core/api.service';
import { LoginComponent } from './login.component';

describe('LoginComponent', () => {
  async function setup(status: number, body: string) {
    TestBed.configureTestingModule({
      imports: [LoginComponent],
      providers: [provideRouter([{ path: '**', children: [] }]), provideNoopAnimations()],
    });
    const api = TestBed.inject(ApiService);
    const calls: string[] = [];
    api.fetchFn = async (url, init) => {
      calls.push(`${init?.method} ${url} ${init?.body}`);
      return new Response(body, { status });
    };
    const f = TestBed.createComponent(LoginComponent);
    f.detectChanges();
    await f.whenStable();
    return { f, api, calls };
  }

  it('labels every control', async () => {
    const { f } = await setup(200, '{}');
    const el: HTMLElement = f.nativeElement;
    for (const input of Array.from(el.querySelectorAll('input'))) {
      expect(el.querySelector(`label[for="${input.id}"]`), `label for #${input.id}`).not.toBeNull();
    }
  });

  it("shows vCenter's refusal where it happened", async () => {
    const { f, calls } = await setup(401, '{"error":"vCenter refused the user name or password: check them and try again"}');
    f.componentInstance.username = 'admin@vsphere.local';
    f.componentInstance.password = 'bad';
    await f.componentInstance.submit();
    f.detectChanges();
    expect(calls[0]).toContain('POST');
    expect(calls[0]).toContain('/api/v1/session');
    expect((f.nativeElement as HTMLElement).querySelector('#login-error')?.textContent).toContain('check them and try again');
  });

  it('asks for a user name before calling the server', async () => {
    const { f, calls } = await setup(200, '{}');
    await f.componentInstance.submit();
    f.detectChanges();
    expect(calls).toEqual([]);
    expect((f.nativeElement as HTMLElement).querySelector('#login-error')?.textContent).toContain('vCenter user name');
  });

  it('signs in and goes to the requested view', async () => {
    const { f, api } = await setup(200, '{"user":"admin@vsphere.local"}');
    const router = TestBed.inject(Router);
    const nav: string[] = [];
    router.navigateByUrl = async (u) => {
      nav.push(String(u));
      return true;
    };
    f.componentInstance.username = 'admin@vsphere.local';
    await f.componentInstance.submit();
    expect(api.user()).toBe('admin@vsphere.local');
    expect(nav).toEqual(['/global']);
  });
});
