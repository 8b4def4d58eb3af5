import { Component, Input, signal } from '@angular/core';
import { TextSpan, codeSpans } from '../core/format';

// MessageComponent shows a message of the gateway or the plugin server
// with its backquoted commands as code (`cairnctl system info`): what to
// type reads as something to type, not as text with stray accents.
@Component({
  selector: 'cairn-message',
  template: `@for (s of spans(); track $index) {@if (s.code) {<code>{{ s.text }}</code>} @else {<ng-container>{{ s.text }}</ng-container>}}`,
})
export class MessageComponent {
  readonly spans = signal<TextSpan[]>([]);
  @Input({ required: true }) set text(v: string | null | undefined) {
    this.spans.set(codeSpans(v ?? ''));
  }
}
