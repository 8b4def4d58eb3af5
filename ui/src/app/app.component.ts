import { Component } from '@angular/core';
import { RouterOutlet } from '@angular/router';

@Component({
  selector: 'cairn-root',
  imports: [RouterOutlet],
  template: `<router-outlet />`,
})
// eslint-disable-next-line @typescript-eslint/no-extraneous-class -- the root component only hosts the router outlet
export class AppComponent {}
