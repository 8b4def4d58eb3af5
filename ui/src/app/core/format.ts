// Human units, as the vSphere Client shows them (binary, one decimal).
export function bytes(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) {
    return '—';
  }
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

// qosLimits shows a volume's limits as the admin set them: "2,000 IOPS ·
// 100 MiB/s", or "unlimited".
export function qosLimits(iops: number | undefined, bandwidth: number | undefined): string {
  const parts: string[] = [];
  if (iops) {
    parts.push(`${iops.toLocaleString('en-US')} IOPS`);
  }
  if (bandwidth) {
    const mib = bandwidth / MiB;
    parts.push(`${Number.isInteger(mib) ? mib.toLocaleString('en-US') : mib.toFixed(2)} MiB/s`);
  }
  return parts.length ? parts.join(' · ') : 'unlimited';
}

export const MiB = 1 << 20;

// addresses returns count consecutive IPv4 addresses from start, or an
// error message when start is not an address or the range leaves the
// subnet's last octet.
export function addresses(start: string, count: number): string[] | string {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(start.trim());
  if (!m) {
    return `${start || '(empty)'} is not an IPv4 address: give the first address, e.g. 10.20.0.11`;
  }
  const o = m.slice(1).map(Number);
  if (o.some((x) => x > 255)) {
    return `${start} is not an IPv4 address`;
  }
  const n = ((o[0] << 24) >>> 0) + (o[1] << 16) + (o[2] << 8) + o[3];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const a = n + i;
    if ((a & 0xff) === 255 || (a & 0xff) === 0) {
      return `the range from ${start} for ${count} hosts crosses a .0 or .255 address: start lower`;
    }
    out.push([(a >>> 24) & 0xff, (a >>> 16) & 0xff, (a >>> 8) & 0xff, a & 0xff].join('.'));
  }
  return out;
}

// duplicates lists the values that occur more than once (empty ignored).
export function duplicates(values: (string | undefined)[]): string[] {
  const seen = new Set<string>();
  const dup = new Set<string>();
  for (const v of values) {
    if (!v) {
      continue;
    }
    if (seen.has(v)) {
      dup.add(v);
    }
    seen.add(v);
  }
  return [...dup];
}

// TextSpan is a piece of a message: plain text, or a command to type.
export interface TextSpan {
  text: string;
  code: boolean;
}

// codeSpans splits a message of the gateway or the plugin server at its
// backticks ("check `cairn sds` on its host"): the quoted parts are
// commands, shown as code instead of as stray accents. A backtick without
// its pair stays as it is.
export function codeSpans(message: string): TextSpan[] {
  const out: TextSpan[] = [];
  let rest = message;
  for (;;) {
    const open = rest.indexOf('`');
    const close = open < 0 ? -1 : rest.indexOf('`', open + 1);
    if (close < 0) {
      break;
    }
    if (open > 0) {
      out.push({ text: rest.slice(0, open), code: false });
    }
    if (close > open + 1) {
      out.push({ text: rest.slice(open + 1, close), code: true });
    }
    rest = rest.slice(close + 1);
  }
  if (rest) {
    out.push({ text: rest, code: false });
  }
  return out;
}
