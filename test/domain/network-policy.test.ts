import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';

/**
 * The SSRF policy, offline: every refused range (the IANA IPv4 and IPv6 special-purpose registries, less
 * what is globally reachable), each at its first and last address, and the address just outside each edge
 * where that neighbour is a public one (null where it is refused too, or outside global unicast).
 */
interface Range {
  cidr: string;
  why: string;
  first: string;
  last: string;
  before: string | null;
  after: string | null;
}

const V4: Range[] = [
  {
    cidr: '0.0.0.0/8',
    why: 'this network',
    first: '0.0.0.0',
    last: '0.255.255.255',
    before: null,
    after: '1.0.0.0',
  },
  {
    cidr: '10.0.0.0/8',
    why: 'private',
    first: '10.0.0.0',
    last: '10.255.255.255',
    before: '9.255.255.255',
    after: '11.0.0.0',
  },
  {
    cidr: '100.64.0.0/10',
    why: 'CGNAT',
    first: '100.64.0.0',
    last: '100.127.255.255',
    before: '100.63.255.255',
    after: '100.128.0.0',
  },
  {
    cidr: '127.0.0.0/8',
    why: 'loopback',
    first: '127.0.0.0',
    last: '127.255.255.255',
    before: '126.255.255.255',
    after: '128.0.0.0',
  },
  {
    cidr: '169.254.0.0/16',
    why: 'link-local, metadata',
    first: '169.254.0.0',
    last: '169.254.255.255',
    before: '169.253.255.255',
    after: '169.255.0.0',
  },
  {
    cidr: '172.16.0.0/12',
    why: 'private',
    first: '172.16.0.0',
    last: '172.31.255.255',
    before: '172.15.255.255',
    after: '172.32.0.0',
  },
  {
    cidr: '192.0.0.0/24',
    why: 'IETF protocol assignments',
    first: '192.0.0.0',
    last: '192.0.0.255',
    before: '191.255.255.255',
    after: '192.0.1.0',
  },
  {
    cidr: '192.0.2.0/24',
    why: 'documentation',
    first: '192.0.2.0',
    last: '192.0.2.255',
    before: '192.0.1.255',
    after: '192.0.3.0',
  },
  {
    cidr: '192.88.99.0/24',
    why: '6to4 relay anycast',
    first: '192.88.99.0',
    last: '192.88.99.255',
    before: '192.88.98.255',
    after: '192.88.100.0',
  },
  {
    cidr: '192.168.0.0/16',
    why: 'private',
    first: '192.168.0.0',
    last: '192.168.255.255',
    before: '192.167.255.255',
    after: '192.169.0.0',
  },
  {
    cidr: '198.18.0.0/15',
    why: 'benchmarking',
    first: '198.18.0.0',
    last: '198.19.255.255',
    before: '198.17.255.255',
    after: '198.20.0.0',
  },
  {
    cidr: '198.51.100.0/24',
    why: 'documentation',
    first: '198.51.100.0',
    last: '198.51.100.255',
    before: '198.51.99.255',
    after: '198.51.101.0',
  },
  {
    cidr: '203.0.113.0/24',
    why: 'documentation',
    first: '203.0.113.0',
    last: '203.0.113.255',
    before: '203.0.112.255',
    after: '203.0.114.0',
  },
  {
    cidr: '224.0.0.0/4',
    why: 'multicast',
    first: '224.0.0.0',
    last: '239.255.255.255',
    before: '223.255.255.255',
    after: null,
  },
  {
    cidr: '240.0.0.0/4',
    why: 'reserved, limited broadcast',
    first: '240.0.0.0',
    last: '255.255.255.255',
    before: null,
    after: null,
  },
];

const ONES = 'ffff:ffff:ffff:ffff';
const V6: Range[] = [
  {
    cidr: '::/96',
    why: 'IPv4-compatible, :: and ::1 among them',
    first: '::',
    last: '::ffff:ffff',
    before: null,
    after: null,
  },
  {
    cidr: '::ffff:0:0:0/96',
    why: 'SIIT',
    first: '::ffff:0:0:0',
    last: '::ffff:0:ffff:ffff',
    before: null,
    after: null,
  },
  {
    cidr: '64:ff9b::/96',
    why: 'NAT64',
    first: '64:ff9b::',
    last: '64:ff9b::ffff:ffff',
    before: null,
    after: null,
  },
  {
    cidr: '64:ff9b:1::/48',
    why: 'local-use NAT64',
    first: '64:ff9b:1::',
    last: `64:ff9b:1:ffff:${ONES}:ffff`,
    before: null,
    after: null,
  },
  { cidr: '100::/64', why: 'discard-only', first: '100::', last: `100::${ONES}`, before: null, after: null },
  {
    cidr: '100:0:0:1::/64',
    why: 'dummy prefix (RFC 9780)',
    first: '100:0:0:1::',
    last: `100:0:0:1:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: '2001::/23',
    why: 'IETF protocol assignments',
    first: '2001::',
    last: `2001:1ff:ffff:ffff:${ONES}`,
    before: `2000:ffff:ffff:ffff:${ONES}`,
    after: '2001:200::',
  },
  {
    cidr: '2001::/32',
    why: 'Teredo',
    first: '2001::',
    last: `2001:0:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: '2001:2::/48',
    why: 'benchmarking',
    first: '2001:2::',
    last: `2001:2:0:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: '2001:10::/28',
    why: 'ORCHID (deprecated)',
    first: '2001:10::',
    last: `2001:1f:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: '2001:20::/28',
    why: 'ORCHIDv2',
    first: '2001:20::',
    last: `2001:2f:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: '2001:db8::/32',
    why: 'documentation',
    first: '2001:db8::',
    last: `2001:db8:ffff:ffff:${ONES}`,
    before: `2001:db7:ffff:ffff:${ONES}`,
    after: '2001:db9::',
  },
  {
    cidr: '2002::/16',
    why: '6to4',
    first: '2002::',
    last: `2002:ffff:ffff:ffff:${ONES}`,
    before: `2001:ffff:ffff:ffff:${ONES}`,
    after: '2003::',
  },
  {
    cidr: '3fff::/20',
    why: 'documentation (RFC 9637)',
    first: '3fff::',
    last: `3fff:fff:ffff:ffff:${ONES}`,
    before: `3ffe:ffff:ffff:ffff:${ONES}`,
    after: '3fff:1000::',
  },
  {
    cidr: '5f00::/16',
    why: 'SRv6 SIDs',
    first: '5f00::',
    last: `5f00:ffff:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: 'fc00::/7',
    why: 'unique-local',
    first: 'fc00::',
    last: `fdff:ffff:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: 'fe80::/10',
    why: 'link-local',
    first: 'fe80::',
    last: `febf:ffff:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: 'fec0::/10',
    why: 'site-local (deprecated)',
    first: 'fec0::',
    last: `feff:ffff:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
  {
    cidr: 'ff00::/8',
    why: 'multicast',
    first: 'ff00::',
    last: `ffff:ffff:ffff:ffff:${ONES}`,
    before: null,
    after: null,
  },
];

/** The forms issue 37 found let through, and those refused already; each must stay refused. */
export const REFUSED_FORMS = [
  '::127.0.0.1', // IPv4-compatible
  '::a9fe:a9fe', // IPv4-compatible, carrying 169.254.169.254
  '::ffff:0:7f00:1', // SIIT
  '64:ff9b:1::7f00:1', // local-use NAT64
  'fec0::1', // site-local
  '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
  '192.88.99.1', // 6to4 relay anycast
  '64:ff9b::7f00:1', // NAT64
  '2002:7f00:1::', // 6to4
] as const;

describe('the webhook network policy (nothing allowed)', () => {
  const policy = new NetworkPolicy();

  for (const range of [...V4, ...V6]) {
    test(`${range.cidr} (${range.why}): its first and last addresses refused, its public neighbours permitted`, () => {
      assert.equal(policy.permits(range.first), false, `${range.first} is refused`);
      assert.equal(policy.permits(range.last), false, `${range.last} is refused`);
      if (range.before !== null)
        assert.equal(policy.permits(range.before), true, `${range.before} is permitted`);
      if (range.after !== null)
        assert.equal(policy.permits(range.after), true, `${range.after} is permitted`);
    });
  }

  test('an IPv4-mapped address is judged as the IPv4 address it carries, dotted or in hex', () => {
    for (const range of V4) {
      for (const address of [range.first, range.last]) {
        assert.equal(policy.permits(`::ffff:${address}`), false, `::ffff:${address}`);
        assert.equal(policy.permits(`0:0:0:0:0:ffff:${address}`), false, `0:0:0:0:0:ffff:${address}`);
      }
      if (range.after !== null)
        assert.equal(policy.permits(`::ffff:${range.after}`), true, `::ffff:${range.after}`);
    }
    assert.equal(policy.permits('::ffff:7f00:1'), false);
    assert.equal(policy.permits('::ffff:a9fe:a9fe'), false);
    assert.equal(policy.permits('::ffff:808:808'), true, '8.8.8.8');
  });

  test('the forms that were let through are refused, and so are NAT64 and 6to4 still', () => {
    assert.deepEqual(
      REFUSED_FORMS.filter((address) => policy.permits(address)),
      [],
    );
  });

  test('a translation form is refused whole, whatever IPv4 address it carries (public ones too)', () => {
    for (const address of [
      '::8.8.8.8',
      '::ffff:0:808:808',
      '64:ff9b::808:808',
      '64:ff9b:1::808:808',
      '2002:808:808::1',
    ])
      assert.equal(policy.permits(address), false, address);
  });

  test('public addresses, and globally reachable ones in special-purpose blocks, are permitted', () => {
    for (const address of [
      '8.8.8.8',
      '1.1.1.1',
      '192.31.196.1', // AS112
      '192.175.48.1', // AS112 direct delegation
      '2606:4700:4700::1111',
      '2620:4f:8000::1', // AS112 direct delegation
      '2001:4860:4860::8888',
    ])
      assert.equal(policy.permits(address), true, address);
  });

  test('what is not an IP address is not permitted', () => {
    for (const address of ['', 'localhost', '1.2.3', '::g', '256.0.0.1'])
      assert.equal(policy.permits(address), false, JSON.stringify(address));
  });

  test('a zone index does not hide a link-local address', () => {
    assert.equal(policy.permits('fe80::1%eth0'), false);
  });
});

describe('the webhook network policy with WEBHOOK_ALLOWED_NETWORKS', () => {
  test('127.0.0.0/8 lets in 127.0.0.1 and its IPv4-mapped forms, but not the translation forms that carry it', () => {
    const policy = new NetworkPolicy(parseNetworks('127.0.0.0/8'));
    for (const address of ['127.0.0.1', '127.255.255.255', '::ffff:127.0.0.1', '::ffff:7f00:1'])
      assert.equal(policy.permits(address), true, address);
    for (const address of [
      '::127.0.0.1',
      '::ffff:0:7f00:1',
      '64:ff9b::7f00:1',
      '64:ff9b:1::7f00:1',
      '2002:7f00:1::',
    ])
      assert.equal(policy.permits(address), false, address);
    assert.equal(policy.permits('10.0.0.1'), false, 'other private ranges stay refused');
  });

  test('an IPv6 range lets its addresses in: NAT64 for a network that needs it, unique-local', () => {
    const policy = new NetworkPolicy(parseNetworks('64:ff9b::/96, fd00::/8'));
    assert.equal(policy.permits('64:ff9b::808:808'), true);
    assert.equal(policy.permits('fd12::1'), true);
    assert.equal(policy.permits('fc00::1'), false, 'fc00::/8 is outside fd00::/8');
    assert.equal(policy.permits('64:ff9b:1::1'), false);
  });

  test('::ffff:0:0/96 allowed lets in IPv4-mapped addresses, and the IPv4 addresses they carry', () => {
    const policy = new NetworkPolicy(parseNetworks('::ffff:0:0/96'));
    assert.equal(policy.permits('::ffff:127.0.0.1'), true);
    assert.equal(policy.permits('::1'), false);
  });

  test('a list that is not CIDR is refused, naming the entry', () => {
    assert.throws(() => parseNetworks('127.0.0.0/8, 10.0.0.0'), /"10\.0\.0\.0" is not a network in CIDR/);
    assert.throws(() => parseNetworks('10.0.0.0/33'), /"10\.0\.0\.0\/33"/);
    assert.throws(() => parseNetworks('::/129'), /"::\/129"/);
    assert.equal(
      new NetworkPolicy(parseNetworks(' , ::/128 ,')).permits('::'),
      true,
      'empty entries skipped',
    );
  });
});
