// Runs the Cotangent core (wasm) off the main thread. Protocol: {id, kind, ...} in; {id, ok, result|error} out,
// preceded for 'analyse-stream' by one {id, ok, partial: true, result: {json, phase_ms}} per phase.
// The page terminates and restarts this worker when a run exceeds its wall-time limit or the wasm traps.
import init, * as core from '../cotangent-web.js';

const ready = init({ module_or_path: new URL('../cotangent-web_bg.wasm', import.meta.url) });

self.onmessage = async (ev) => {
  const msg = ev.data;
  try {
    await ready;
    let result;
    if (msg.kind === 'hello') result = { stages: core.stages(), chains: core.chains(), examples: core.examples(), version: core.version() };
    else if (msg.kind === 'analyse') {
      // The JSON route is several times cheaper for big results (NaN and ±∞ arrive as "NaN", "Infinity",
      // "-Infinity" on both routes); the object route is the fallback if serialization fails.
      const json = core.analyse_json(msg.source, msg.options || {});
      result = json ? { json } : core.analyse(msg.source, msg.options || {});
    }
    else if (msg.kind === 'analyse-stream') {
      // Each phase (a list of stage ids) is posted by the core itself as it finishes: {id, partial, result}.
      result = { phases: core.analyse_stream(msg.id, msg.source, msg.options || {}, msg.phases) };
    }
    else if (msg.kind === 'detail') result = core.stage_detail(msg.run_id, msg.stage, undefined) ?? null;
    else if (msg.kind === 'step') result = core.step_texts(msg.run_id, msg.stage, msg.index) ?? null;
    else if (msg.kind === 'view') result = core.view_text(msg.run_id, msg.stage, msg.name) ?? null;
    else if (msg.kind === 'draw') result = core.draw_graph(msg.graph, msg.limit ?? undefined) ?? null;
    else throw new Error('unknown request ' + msg.kind);
    self.postMessage({ id: msg.id, ok: true, result });
  } catch (e) {
    // A Rust panic surfaces as a WebAssembly RuntimeError ("unreachable"); the instance is then unusable.
    self.postMessage({ id: msg.id, ok: false, fatal: e instanceof WebAssembly.RuntimeError, error: String(e && e.message || e) });
  }
};
