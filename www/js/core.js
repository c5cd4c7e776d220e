// The client of the core's Web Worker (worker.js): one request at a time, a wall-time watchdog, and a
// restart on timeout or a trap.

const WALL_LIMIT_MS = 3000;

export class Core {
  constructor(onRestart) {
    this.onRestart = onRestart;
    this.seq = 0;
    this.queue = [];
    this.current = null;
    this.spawn();
  }
  spawn() {
    this.worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    this.worker.onmessage = ev => this.settle(ev.data);
    this.worker.onerror = ev => { ev.preventDefault?.(); this.fail('the core failed to start: ' + (ev.message || 'worker error'), true); };
  }
  /** kind: 'hello' | 'analyse' | 'analyse-stream' | 'detail' | 'step' | 'view' | 'draw'; a request with a `slot` replaces a
   *  queued one of the same slot; `onPartial` receives each phase of an 'analyse-stream' as it lands. */
  request(kind, payload = {}, slot = null, onPartial = null) {
    return new Promise((resolve, reject) => {
      const job = { id: ++this.seq, kind, payload, slot, resolve, reject, onPartial };
      if (slot) {
        const i = this.queue.findIndex(j => j.slot === slot);
        if (i >= 0) { this.queue[i].reject(new Superseded()); this.queue.splice(i, 1); }
      }
      this.queue.push(job);
      this.pump();
    });
  }
  pump() {
    if (this.current || !this.queue.length) return;
    const job = this.current = this.queue.shift();
    job.started = performance.now();
    this.arm(job);
    this.worker.postMessage({ ...job.payload, id: job.id, kind: job.kind });
  }
  /** The wall-time watchdog: each phase of a streamed run gets the whole limit. */
  arm(job) {
    clearTimeout(job.timer);
    job.timer = setTimeout(() => {
      this.restart(`stopped: the run took longer than ${WALL_LIMIT_MS / 1000} s, so the core was stopped and restarted`);
    }, WALL_LIMIT_MS);
  }
  settle(msg) {
    const job = this.current;
    if (!job || msg.id !== job.id) return;
    if (msg.partial) {
      this.arm(job);
      const r = msg.result;
      job.onPartial?.(Object.assign(JSON.parse(r.json), { phase_ms: r.phase_ms }));
      return;
    }
    clearTimeout(job.timer);
    this.current = null;
    if (msg.ok) job.resolve(msg.result && typeof msg.result.json === 'string' ? JSON.parse(msg.result.json) : msg.result);
    else {
      job.reject(new Error(msg.error));
      if (msg.fatal) { this.worker.terminate(); this.spawn(); this.onRestart?.('the core crashed (' + msg.error + ') and was restarted'); }
    }
    this.pump();
  }
  fail(message, respawn) {
    const job = this.current;
    this.current = null;
    if (job) { clearTimeout(job.timer); job.reject(new Error(message)); }
    if (respawn) { this.worker.terminate(); this.spawn(); }
    this.pump();
  }
  restart(message) {
    this.worker.terminate();
    const job = this.current;
    this.current = null;
    this.spawn();
    if (job) job.reject(new Stopped(message));
    this.onRestart?.(message);
    this.pump();
  }
}
export class Superseded extends Error { constructor() { super('superseded'); } }
export class Stopped extends Error {}
