/*
 * commprof's formatters for the pages' scripts: sizes, durations, rates
 * and counts, read the same way in the report's charts, the timeline and
 * the live page. Pages inline this file before the scripts that use it,
 * which find it as the global CommprofFormat. internal/units is the Go
 * side: both print every case of internal/units/testdata/format.json
 * alike, which the Go tests of both check.
 */
(function (root) {
  'use strict';

  function trim(x, digits) {
    return String(+x.toFixed(digits));
  }

  // Three significant digits for values from 0.001 to 999, with no
  // trailing zeros.
  function sig(x) {
    const a = Math.abs(x);
    return a >= 100 ? trim(x, 0) : a >= 10 ? trim(x, 1) : trim(x, 2);
  }

  // A duration in ns, in the largest unit it reaches once rounded: 850 ns,
  // 12.3 µs, 4.56 ms, 2.1 s (999.7 µs is 1 ms).
  function duration(ns) {
    const a = Math.abs(ns);
    if (a < 999.5) return trim(ns, 0) + ' ns';
    if (a < 999.5e3) return sig(ns / 1e3) + ' µs';
    if (a < 999.5e6) return sig(ns / 1e6) + ' ms';
    return sig(ns / 1e9) + ' s';
  }

  // A whole number with thousands separators: 1,234,567.
  function int(n) {
    return Math.round(n).toLocaleString('en-US');
  }

  // A number with thousands separators and up to two decimals: 2.5, 1,024.
  function number(v) {
    return Number(v).toLocaleString('en-US', { maximumFractionDigits: 2 });
  }

  // A size in binary units (KiB = 1024 B), as buffer sizes are given:
  // 512 B, 64 KiB, 1.5 MiB.
  function bytes(b) {
    if (b < 0) return '-' + bytes(-b);
    if (b < 1024) return int(b) + ' B';
    const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    let v = b / 1024;
    let u = 0;
    while (v >= 1023.5 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    return sig(v) + ' ' + units[u];
  }

  // A rate given in GB/s (GB = 1e9 bytes): 8.12 GB/s, 1,250 GB/s, and
  // MB/s below 0.01 GB/s.
  function gbps(v) {
    if (v >= 1000) return int(v) + ' GB/s';
    if (v >= 0.01 || v <= 0) return sig(v) + ' GB/s';
    return sig(v * 1000) + ' MB/s';
  }

  // The rate of bytes moved in ns: bytes per ns is exactly GB/s.
  function bandwidth(b, ns) {
    return gbps(b / ns);
  }

  // A fraction as a percentage with up to `decimals` decimals (default
  // one): 0.125 → 12.5%.
  function percent(f, decimals) {
    return trim(100 * f, decimals === undefined ? 1 : decimals) + '%';
  }

  // Wall-clock time elapsed, in ns: 4.2s, 12s, 3m 5s, 1h 2m.
  function elapsed(ns) {
    const s = Math.max(0, ns) / 1e9;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + 's';
    const m = Math.floor(s / 60);
    const h = Math.floor(m / 60);
    if (h > 0) return h + 'h ' + (m % 60) + 'm';
    return m + 'm ' + Math.floor(s % 60) + 's';
  }

  root.CommprofFormat = { duration, int, number, bytes, gbps, bandwidth, percent, elapsed };
})(typeof window !== 'undefined' ? window : globalThis);
