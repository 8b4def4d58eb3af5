import { addresses, bytes, codeSpans, duplicates } from './format';

describe('format', () => {
  it('bytes', () => {
    expect(bytes(0)).toBe('0 B');
    expect(bytes(1536)).toBe('1.5 KB');
    expect(bytes(800 * 2 ** 30)).toBe('800.0 GB');
    expect(bytes(undefined)).toBe('—');
  });

  it('addresses fill a range and refuse bad starts', () => {
    expect(addresses('10.20.0.11', 3)).toEqual(['10.20.0.11', '10.20.0.12', '10.20.0.13']);
    expect(addresses('10.20.0.253', 3)).toMatch(/crosses a \.0 or \.255/);
    expect(addresses('10.20.0', 1)).toMatch(/not an IPv4 address/);
    expect(addresses('10.20.0.300', 1)).toMatch(/not an IPv4 address/);
  });

  it('codeSpans makes the backquoted commands of a message code', () => {
    expect(codeSpans('SDS sds3 is down (no liveness lease): check `cairn sds` on its host')).toEqual([
      { text: 'SDS sds3 is down (no liveness lease): check ', code: false },
      { text: 'cairn sds', code: true },
      { text: ' on its host', code: false },
    ]);
    expect(codeSpans('`a``b` c')).toEqual([
      { text: 'a', code: true },
      { text: 'b', code: true },
      { text: ' c', code: false },
    ]);
    expect(codeSpans('one ` alone')).toEqual([{ text: 'one ` alone', code: false }]);
    expect(codeSpans('`x` and ` y')).toEqual([
      { text: 'x', code: true },
      { text: ' and ` y', code: false },
    ]);
    expect(codeSpans('')).toEqual([]);
  });

  it('duplicates', () => {
    expect(duplicates(['a', 'b', undefined, 'a', '', 'b', 'c'])).toEqual(['a', 'b']);
  });
});
