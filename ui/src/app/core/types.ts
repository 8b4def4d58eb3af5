// Types of the plugin server's API (vcenter-plugin/internal/server) and of
// the deployment plan (vcenter-plugin/internal/plan, format version 1).
// Keep them in step with the Go structs' JSON tags.

export interface Disk {
  canonical_name: string;
  display_name: string;
  device_path: string;
  size: number;
  ssd: boolean;
  local: boolean;
  used_by?: string;
  candidate: boolean;
}

export interface PCIDevice {
  id: string;
  vendor: string;
  device: string;
  passthrough_capable: boolean;
  passthrough_enabled: boolean;
  used_by?: string;
}

export interface InventoryHost {
  name: string;
  moref: string;
  cluster?: string;
  version: string;
  build: string;
  connection_state: string;
  in_maintenance: boolean;
  datastores: { name: string; moref: string; type: string; local: boolean; capacity: number; free: number }[] | null;
  networks: string[] | null;
  disks: Disk[] | null;
  pci_devices: PCIDevice[] | null;
  vms: string[] | null;
}

export interface Datacenter {
  name: string;
  clusters: { name: string; moref: string; hosts: string[] }[] | null;
  hosts: InventoryHost[] | null;
  networks: { name: string; moref: string; type: string }[] | null;
  templates: { name: string; moref: string; host: string; properties: string[] }[] | null;
}

export interface Inventory {
  datacenters: Datacenter[];
}

export type Role = 'mdm' | 'tiebreaker' | 'sds' | 'target' | 'gateway';
export const ROLES: Role[] = ['mdm', 'tiebreaker', 'sds', 'target', 'gateway'];

export interface PlanDevice {
  disk?: string;
  pci?: string;
  mode: 'rdm' | 'passthrough';
}

export interface PlanHost {
  name: string;
  roles: Role[];
  fault_set?: string;
  svm_ip?: string;
  data_ip?: string;
  vmkernel_ip?: string;
  devices?: PlanDevice[];
}

export interface Plan {
  version: number;
  system: string;
  datacenter: string;
  template: string;
  protection_domain: string;
  storage_pool: { name: string; spare_percent: number };
  network: { portgroup: string; cidr: string; gateway?: string; dns?: string[]; ntp?: string[] };
  iscsi: { portgroup: string; vswitch?: string; cidr: string; create_vmkernel?: boolean };
  maintenance_mode?: 'instant' | 'protected';
  ssh_authorized_key?: string;
  hosts: PlanHost[];
}

export interface Problem {
  severity: 'error' | 'warning';
  field: string;
  message: string;
}

export interface Validation {
  valid: boolean;
  problems: Problem[];
}

export interface Job {
  name: string;
  state: 'running' | 'succeeded' | 'failed' | 'stopped' | 'interrupted'; // interrupted: the plugin server stopped while it ran
  error?: string;
  started: string;
  ended?: string;
}

export interface ProgressEvent {
  seq: number;
  time: string;
  job: string;
  level: 'info' | 'warn' | 'error';
  step: string;
  host?: string;
  message: string;
  percent?: number; // share done (a device drain)
  eta_seconds?: number;
}

export interface SDS {
  id: string;
  name: string;
  pd_id: string;
  fault_set_id?: string;
  address: string;
  state: string;
  up: boolean;
  maintenance?: { mode: string; state: string };
}

export interface Device {
  id: string;
  name: string;
  sds_id: string;
  pool_id: string;
  path: string;
  capacity: number;
  state: string;
}

export interface Volume {
  id: string;
  name: string;
  pool_id: string;
  size: number;
  thin: boolean;
  wwn: string;
  mappings?: { host_id: string; host_name?: string; read_only?: boolean }[];
  // QoS: the volume's own limits (0: unlimited) and those it runs with
  // (its own, or its pool's per-GiB rule where it has none).
  iops_limit?: number;
  bandwidth_limit?: number; // bytes per second
  effective_iops_limit?: number;
  effective_bandwidth_limit?: number;
}

// VolumeQoS is a QoS change: absent fields stay, 0 removes a limit.
export interface VolumeQoS {
  iops_limit?: number;
  bandwidth_limit?: number;
}

export interface SystemHealth {
  bootstrapped: boolean;
  system: { id: string; name: string } | null;
  // The gateway's field names (GET /api/v1/system), as the plugin server passes them on.
  health: { status: string; sds_count: number; sds_up_count: number; sds_down_names: string[] | null; messages: string[] | null };
  capacity: { raw: number; usable: number; allocated: number };
  rebuild?: GatewayRebuild;
}

// GatewayRebuild is the gateway's rebuild/resync/rebalance progress
// (GET /api/v1/system's "rebuild").
export interface GatewayRebuild {
  degraded_groups: number;
  rebuilding_groups: number;
  resyncing_groups: number;
  rebalancing_groups: number;
  pending_bytes: number;
  done_bytes: number;
  resync_bytes: number;
  rate_bytes_per_second: number;
  percent: number;
  eta_seconds: number | null;
}

export interface SystemView {
  name: string;
  datacenter: string;
  pool: string;
  hosts: string[] | null;
  deploy: { completed: boolean; steps_done: number; last_error?: string };
  health?: SystemHealth;
  // The copy work with its observed ETA, from the same gateway answer as
  // health (the dashboard shows both).
  rebuild?: RebuildProgress;
  sdss?: SDS[];
  devices?: Device[];
  volumes?: Volume[];
  unavailable?: string;
  maintenance?: MaintenanceState;
}

export interface VolumeRequest {
  system: string;
  volume: string;
  datastore?: string;
  size_gib: number;
  thin: boolean;
  hosts?: string[];
}

export interface MaintenanceRequest {
  by: 'host' | 'faultset';
  mode?: 'instant' | 'protected';
  hosts?: string[];
}

// Statistics (GET /systems/{system}/statistics): the gateway's figures of
// one sample interval, and up to 10 minutes of them, oldest first.
export type StatKind = 'system' | 'pool' | 'volume' | 'sds';

export interface StatRate {
  iops: number;
  bytes_per_second: number;
  latency_mean_us: number;
  latency_p99_us: number;
}

export interface StatPoint {
  timestamp: string;
  read: StatRate;
  write: StatRate;
  throttled_seconds: number;
}

export interface Statistics {
  system: string;
  kind: StatKind;
  name?: string;
  timestamp: string | null; // null before the gateway's first sample
  interval_seconds: number;
  read: StatRate;
  write: StatRate;
  throttled_seconds: number;
  history: StatPoint[] | null;
}

// RebuildProgress (GET /systems/{system}/rebuild, and a SystemView's
// rebuild): the gateway's copy work and the ETA the plugin server derives
// from the rate it observed.
export interface RebuildProgress extends GatewayRebuild {
  system: string;
  observed_rate_bytes_per_second: number | null;
  window_seconds: number;
  eta_state: 'idle' | 'estimating' | 'known';
  observed_eta_seconds: number | null;
  observed: string;
}
// VolumeAccess is how a host may use a mapped volume.
export type VolumeAccess = 'read_write' | 'read_only';
// Day-2 devices and maintenance stop (vcenter-plugin/internal/server/devices.go).

export interface MaintenanceState {
  request: MaintenanceRequest;
  units: string[][];
  done_units: number;
  completed: boolean;
  last_error?: string;
  stopped?: boolean;
  unpatched?: string[][];
  stopping?: boolean;
}

export interface StopPlan {
  hosts: string[];
  step: string;
  actions: string[];
  unpatched: boolean;
}

export interface CandidateDisk {
  canonical_name: string;
  display_name: string;
  size: number;
  ssd: boolean;
  local: boolean;
  used_by?: string;
  rdm_capable: boolean;
  mode: 'rdm';
  attached: boolean;
  cairn_device?: string;
  available: boolean;
  reason?: string;
  path: string;
}

export interface CandidatePCI {
  id: string;
  vendor: string;
  device: string;
  mode: 'passthrough';
  available: boolean;
  reason?: string;
}

export interface SDSDisks {
  sds: string;
  host: string;
  svm: string;
  pool: string;
  disks: CandidateDisk[];
  pci: CandidatePCI[];
}

export interface DeviceAddRequest {
  sds: string;
  disk?: string;
  pci?: string;
  pool?: string;
  name?: string;
}

// The rolling upgrade (POST /systems/{system}/upgrade, job upgrade:SYSTEM)
// and what the upgrade page reads from the system's gateway.
export interface UpgradeRequest {
  version: string;
  hosts?: string[];
}

export interface Bundle {
  version: string;
  sha256: string;
  size: number;
  uploaded?: string;
}

export type UpdaterState = 'idle' | 'downloading' | 'installing' | 'done' | 'failed' | 'rolled-back';

export interface UpgradeSVM {
  name: string;
  running: string;
  ordered: string;
  state: UpdaterState;
  message: string;
  updated: string;
  // The ESXi host it runs on (what an upgrade's hosts name); absent for an
  // SVM the system's plan does not know.
  host?: string;
}

export interface UpgradeBundles {
  system: string;
  bundles: Bundle[];
}

export interface UploadedBundle {
  system: string;
  bundle: Bundle;
}

export interface UpgradeSVMs {
  system: string;
  svms: UpgradeSVM[];
}

export interface UpgradeStop {
  stopping: boolean;
  message: string;
}
