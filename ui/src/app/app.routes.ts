import { inject } from '@angular/core';
import { CanActivateFn, Router, Routes } from '@angular/router';
import { ApiService } from './core/api.service';
import views from './plugin-views.json';

// signedIn lets a view load when the UI has a session: the vSphere
// Client's token, or a standalone session cookie (probed once).
export const signedIn: CanActivateFn = async (_route, state) => {
  const api = inject(ApiService);
  const router = inject(Router);
  if (api.token || api.user()) {
    return true;
  }
  try {
    await api.systems();
    api.user.set('signed in');
    return true;
  } catch {
    return router.createUrlTree(['/login'], { queryParams: { next: state.url } });
  }
};

// The views plugin.json declares (plugin-views.json) plus the global
// view's pages and the standalone login page.
const viewRoutes: Routes = [
  {
    path: 'global',
    loadComponent: () => import('./views/global.component').then((m) => m.GlobalComponent),
    canActivate: [signedIn],
    children: [
      { path: '', pathMatch: 'full', redirectTo: 'dashboard' },
      { path: 'dashboard', loadComponent: () => import('./dashboard/dashboard.component').then((m) => m.DashboardComponent) },
      { path: 'deploy', loadComponent: () => import('./deploy/deploy.component').then((m) => m.DeployComponent) },
      { path: 'volumes', loadComponent: () => import('./volumes/volumes.component').then((m) => m.VolumesComponent) },
      { path: 'sds', loadComponent: () => import('./dashboard/sds.component').then((m) => m.SdsComponent) },
      {
        path: 'maintenance',
        loadComponent: () => import('./maintenance/maintenance.component').then((m) => m.MaintenanceComponent),
      },
      { path: 'upgrade', loadComponent: () => import('./upgrade/upgrade.component').then((m) => m.UpgradeComponent) },
    ],
  },
  {
    path: 'cluster/monitor',
    canActivate: [signedIn],
    loadComponent: () => import('./dashboard/dashboard.component').then((m) => m.DashboardComponent),
  },
  {
    path: 'cluster/configure',
    canActivate: [signedIn],
    loadComponent: () => import('./deploy/deploy.component').then((m) => m.DeployComponent),
  },
  {
    path: 'host/summary',
    canActivate: [signedIn],
    loadComponent: () => import('./views/host.component').then((m) => m.HostComponent),
    data: { summary: true },
  },
  {
    path: 'host/configure',
    canActivate: [signedIn],
    loadComponent: () => import('./views/host.component').then((m) => m.HostComponent),
    data: { summary: false },
  },
];

// Every declared view has a route (a unit test checks it too).
export const declaredViews = Object.keys(views.views);

export const routes: Routes = [
  ...viewRoutes,
  { path: 'login', loadComponent: () => import('./login/login.component').then((m) => m.LoginComponent) },
  { path: '', pathMatch: 'full', redirectTo: 'global' },
  { path: '**', redirectTo: 'global' },
];
