//! The web crate in headless Chromium (wasm-bindgen-test-runner + chromedriver): the same API as the
//! page's worker uses, in a real browser engine.
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;
wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(v, &JsValue::from_str(key)).unwrap()
}

/// Lets the page's event loop run (a `setTimeout(0)` task): the webdriver polls the page with scripts
/// that wait for the thread, and gives up after about 20 s, so a long test yields between its runs.
async fn yield_to_browser() {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let set_timeout: js_sys::Function = get(&js_sys::global(), "setTimeout").into();
        let _ = set_timeout.call2(&JsValue::NULL, &resolve, &JsValue::from(0));
    });
    let _ = wasm_bindgen_futures::JsFuture::from(p).await;
}

#[wasm_bindgen_test]
fn analyse_in_the_browser() {
    let out = cotangent_web::analyse("input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\n", JsValue::UNDEFINED);
    let stages = js_sys::Array::from(&get(&out, "stages"));
    assert!(stages.length() >= 1);
    let g = js_sys::Array::from(&get(&stages.get(0), "gradient"));
    assert_eq!((g.get(0).as_f64(), g.get(1).as_f64()), (Some(37.0), Some(12.0)));
}

#[wasm_bindgen_test]
async fn every_example_analyses_without_diagnostics() {
    for e in js_sys::Array::from(&cotangent_web::examples()).iter() {
        yield_to_browser().await;
        let name = get(&e, "name").as_string().unwrap();
        // diagnostics come from the front end: forward alone keeps this test quick in debug wasm, where a
        // test holding the page's thread for 20 s times out the webdriver
        let out = cotangent_web::analyse(&get(&e, "source").as_string().unwrap(), js_sys::JSON::parse(r#"{"svg": [], "stages": ["forward"]}"#).unwrap());
        let ds = js_sys::Array::from(&get(&out, "diagnostics"));
        assert_eq!(ds.length(), 0, "{name}: {:?}", get(&ds.get(0), "message"));
    }
}

/// The deepest program the parser lets through in wasm runs on every stage of `chain` in real
/// Chromium (whose stack, not the shadow stack, is the limit: see crate/src/limits.rs). One test per
/// chain, one stage at a time, yielding between them: all 41 stages in one debug-wasm run hold the
/// page's thread past the webdriver's 20 s.
async fn deep_program_runs_on_a_chain(chain: &str) {
    let depth = cotangent::limits::max_nesting() - 10;
    let mut s = String::from("input (0.5, 0.25)\ndef main (x, y) =\n  let a0 = x in\n");
    for i in 1..=depth {
        s.push_str(&format!("  let a{i} = a{} * 0.999 + y in\n", i - 1));
    }
    s.push_str(&format!("  a{depth}\n"));
    let c = cotangent::stages::CHAINS.iter().find(|c| c.id == chain).expect("a registered chain");
    assert!(!c.stages.is_empty(), "{chain}");
    for stage in c.stages {
        yield_to_browser().await;
        let id = stage.info().id;
        let opts = format!(r#"{{"svg": [], "stages": ["{id}"]}}"#);
        let out = cotangent_web::analyse(&s, js_sys::JSON::parse(&opts).unwrap());
        let st = js_sys::Array::from(&get(&out, "stages")).iter().find(|st| get(st, "id").as_string().as_deref() == Some(id));
        let st = st.unwrap_or_else(|| panic!("{id} did not run"));
        match get(&st, "error").as_string() {
            Some(e) => assert!(e.contains("budget"), "{id}: {e}"),
            None => assert_eq!(get(&st, "agrees").as_bool(), Some(true), "{id}"),
        }
    }
}

#[wasm_bindgen_test]
async fn deep_programs_run_in_the_browser_forward_and_krawiec() {
    deep_program_runs_on_a_chain("forward").await;
    deep_program_runs_on_a_chain("krawiec").await;
}

#[wasm_bindgen_test]
async fn deep_programs_run_in_the_browser_dualrev() {
    deep_program_runs_on_a_chain("dualrev").await;
}

#[wasm_bindgen_test]
async fn deep_programs_run_in_the_browser_unf() {
    deep_program_runs_on_a_chain("unf").await;
}

// Too slow for the webdriver's 20 s in debug wasm (the test command runs the browser tests in debug);
// the release-wasm Node test runs these stages at this depth (node.rs, deep_programs_run_or_stop_at_a_budget_in_wasm).
#[wasm_bindgen_test]
#[cfg_attr(debug_assertions, ignore)]
async fn deep_programs_run_in_the_browser_chad() {
    deep_program_runs_on_a_chain("chad").await;
}

// Too slow for the webdriver's 20 s in debug wasm (the test command runs the browser tests in debug);
// the release-wasm Node test runs these stages at this depth (node.rs, deep_programs_run_or_stop_at_a_budget_in_wasm).
#[wasm_bindgen_test]
#[cfg_attr(debug_assertions, ignore)]
async fn deep_programs_run_in_the_browser_arrays() {
    deep_program_runs_on_a_chain("arrays").await;
}

/// The longest let chain the Huot–Shaikhha chain's nesting budget lets through runs on `unf/direct`
/// in real Chromium (its output nests about two levels per let, on right-hand sides).
#[wasm_bindgen_test]
fn the_longest_let_chain_unf_direct_takes_runs_in_the_browser() {
    let depth = cotangent::limits::max_brackets() / 2 - 6;
    let mut s = String::from("input (0.5, 0.25)\ndef main (x, y) =\n  let a0 = x in\n");
    for i in 1..=depth {
        s.push_str(&format!("  let a{i} = a{} * 0.999 + y in\n", i - 1));
    }
    s.push_str(&format!("  a{depth}\n"));
    // unf/direct and the UNF route's last stage (the release-wasm Node test runs every stage at this depth)
    let out = cotangent_web::analyse(&s, js_sys::JSON::parse(r#"{"svg": [], "stages": ["unf/direct", "unf/back"]}"#).unwrap());
    let st = js_sys::Array::from(&get(&out, "stages")).iter().find(|s| get(s, "id").as_string().as_deref() == Some("unf/direct")).expect("unf/direct ran");
    assert_eq!(get(&st, "error").as_string(), None);
    assert_eq!(get(&st, "agrees").as_bool(), Some(true));
}
