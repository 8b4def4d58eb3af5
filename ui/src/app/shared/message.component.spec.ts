import { TestBed } from '@angular/core/testing';
import { MessageComponent } from './message.component';

describe('MessageComponent', () => {
  it('shows the backquoted commands of a message as code, the rest as text', () => {
    TestBed.configureTestingModule({ imports: [MessageComponent] });
    const f = TestBed.createComponent(MessageComponent);
    f.componentRef.setInput('text', 'SDS sds3 is down (no liveness lease): check `cairn sds` on its host');
    f.detectChanges();
    const el = f.nativeElement as HTMLElement;
    expect(el.textContent).toBe('SDS sds3 is down (no liveness lease): check cairn sds on its host');
    expect(Array.from(el.querySelectorAll('code'), (c) => c.textContent)).toEqual(['cairn sds']);
    f.componentRef.setInput('text', null);
    f.detectChanges();
    expect(el.textContent).toBe('');
    f.destroy();
  });
});
