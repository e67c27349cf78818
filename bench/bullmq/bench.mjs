// BullMQ's side of flowlite's benchmark suite: one scenario per process,
// against a redis-server of its own (AOF on, fsync on every write, so that
// an acknowledged job survives a power loss like a committed SQLite
// transaction with synchronous=FULL), started on a free loopback port in a
// temporary directory and shut down at the end.
//
//   node bench.mjs SCENARIO N DIR
//
// prints one JSON line: {"value": …, "done": …, "rss_kb": …} where value is
// jobs/s, workflows/s or the p99 latency in milliseconds, and rss_kb is
// the peak RSS of node plus that of redis-server (the suite's rusage of
// this process includes redis-server's CPU, since node waits for it).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Queue, Worker, FlowProducer } from 'bullmq';
import { Redis } from 'ioredis';

// Worker concurrency: BullMQ runs up to this many jobs of one worker at
// once; no-op jobs need many in flight to keep Redis busy.
const CONCURRENCY = 100;
// The latency scenario's worker concurrency: at 200 no-op jobs/s one slot
// is never busy, and more slots made BullMQ slower to pick a job up (p99
// 34 ms with 1, 55 ms with 10, 640 ms with 100 on the 2-core machine).
const LATENCY_CONCURRENCY = 1;
// Jobs per addBulk call, as many as flowlite puts in one transaction.
const BULK = 1000;
const LATENCY_RATE = 200;
const QUEUE = 'bench';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function startRedis(dir) {
  const port = await freePort();
  const proc = spawn('/usr/bin/redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    '--appendonly', 'yes', '--appendfsync', 'always', '--save', '',
    '--protected-mode', 'yes', '--loglevel', 'warning',
  ], { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const conn = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
  for (let i = 0; ; i++) {
    const probe = new Redis({ ...conn, lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => {}); // refused until the server listens
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      break;
    } catch (err) {
      probe.disconnect();
      if (i > 200) throw new Error(`redis-server on port ${port} did not start: ${err.message}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  return {
    conn,
    // stop shuts the server down and returns its peak RSS in KiB, read
    // before it exits.
    async stop() {
      let hwm = 0;
      try {
        const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
        hwm = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
      } catch { /* not Linux: leave it out */ }
      // SIGTERM is redis-server's graceful shutdown (the AOF is fsynced
      // already: appendfsync always).
      proc.kill('SIGTERM');
      await exited;
      return hwm;
    },
  };
}

// completions resolves once n jobs completed on worker (of name, when
// given): BullMQ emits 'completed' after the job's state was written.
function completions(worker, n, name) {
  let done = 0;
  return new Promise((resolve, reject) => {
    worker.on('completed', (job) => {
      if (!name || job.name === name) {
        done++;
        if (done === n) resolve(done);
      }
    });
    worker.on('failed', (job, err) => reject(new Error(`job ${job?.id} failed: ${err.message}`)));
  });
}

async function addBulk(queue, n) {
  for (let lo = 0; lo < n; lo += BULK) {
    const jobs = [];
    for (let i = lo; i < Math.min(lo + BULK, n); i++) jobs.push({ name: 'noop', data: { n: i } });
    await queue.addBulk(jobs);
  }
}

async function concurrently(callers, n, f) {
  let next = 0;
  await Promise.all(Array.from({ length: callers }, async () => {
    for (let i = next++; i < n; i = next++) await f(i);
  }));
}

const scenarios = {
  async drain(conn, n) {
    const queue = new Queue(QUEUE, { connection: conn });
    await addBulk(queue, n);
    const worker = new Worker(QUEUE, async () => {}, { connection: conn, concurrency: CONCURRENCY, autorun: false });
    const done = completions(worker, n);
    const start = performance.now();
    worker.run();
    const count = await done;
    const secs = (performance.now() - start) / 1000;
    await worker.close();
    await queue.close();
    return { value: n / secs, done: count };
  },

  async bulk(conn, n) {
    const queue = new Queue(QUEUE, { connection: conn });
    await queue.waitUntilReady();
    const start = performance.now();
    await addBulk(queue, n);
    const secs = (performance.now() - start) / 1000;
    const done = await queue.getWaitingCount();
    await queue.close();
    return { value: n / secs, done };
  },

  enqueue1: (conn, n) => enqueue(conn, n, 1),
  enqueue16: (conn, n) => enqueue(conn, n, 16),

  // A flow is a parent job and three children: BullMQ runs the children
  // (in parallel, not in sequence) and then the parent, so a "workflow"
  // here is four jobs, and it is done when its parent completed.
  async workflows(conn, n) {
    const flows = new FlowProducer({ connection: conn });
    for (let lo = 0; lo < n; lo += 100) {
      const batch = [];
      for (let i = lo; i < Math.min(lo + 100, n); i++) {
        batch.push({
          name: 'parent', queueName: QUEUE, data: { wf: i },
          children: [1, 2, 3].map((s) => ({ name: `step${s}`, queueName: QUEUE, data: { wf: i } })),
        });
      }
      await flows.addBulk(batch);
    }
    const worker = new Worker(QUEUE, async () => {}, { connection: conn, concurrency: CONCURRENCY, autorun: false });
    const done = completions(worker, n, 'parent');
    const start = performance.now();
    worker.run();
    const count = await done;
    const secs = (performance.now() - start) / 1000;
    await worker.close();
    await flows.close();
    return { value: n / secs, done: count };
  },

  async latency(conn, n) {
    const queue = new Queue(QUEUE, { connection: conn });
    const samples = [];
    const worker = new Worker(QUEUE, async (job) => {
      samples.push(performance.now() - job.data.t);
    }, { connection: conn, concurrency: LATENCY_CONCURRENCY });
    await worker.waitUntilReady();
    await new Promise((r) => setTimeout(r, 500));
    const interval = 1000 / LATENCY_RATE;
    const begin = performance.now();
    for (let i = 0; i < n; i++) {
      const wait = begin + i * interval - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await queue.add('latency', { t: performance.now() });
    }
    while (samples.length < n) await new Promise((r) => setTimeout(r, 5));
    await worker.close();
    await queue.close();
    samples.sort((a, b) => a - b);
    const at = (q) => samples[Math.floor(q * (samples.length - 1))];
    return { value: at(0.99), p50: at(0.5), done: samples.length };
  },
};

async function enqueue(conn, n, callers) {
  const queue = new Queue(QUEUE, { connection: conn });
  await queue.waitUntilReady();
  const start = performance.now();
  await concurrently(callers, n, (i) => queue.add('noop', { n: i }));
  const secs = (performance.now() - start) / 1000;
  const done = await queue.getWaitingCount();
  await queue.close();
  return { value: n / secs, done };
}

async function main() {
  const [scenario, nArg, dir] = process.argv.slice(2);
  const f = scenarios[scenario];
  if (!f || !nArg || !dir) {
    throw new Error(`usage: node bench.mjs {${Object.keys(scenarios).join('|')}} N DIR`);
  }
  const redis = await startRedis(dir);
  let result;
  try {
    result = await f(redis.conn, Number(nArg));
  } finally {
    const redisKB = await redis.stop();
    if (result) result.rss_kb = process.resourceUsage().maxRSS + redisKB;
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  console.error('bullmq bench:', err);
  process.exit(1);
});
