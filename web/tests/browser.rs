//! The web crate in headless Chromium (wasm-bindgen-test-runner + chromedriver): the same API as the
//! page's worker uses, in a real browser engine.
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;
wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(v, &JsValue::from_str(key)).unwrap()
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
fn every_example_analyses_without_diagnostics() {
    for e in js_sys::Array::from(&cotangent_web::examples()).iter() {
        let name = get(&e, "name").as_string().unwrap();
        let out = cotangent_web::analyse(&get(&e, "source").as_string().unwrap(), js_sys::JSON::parse(r#"{"svg": []}"#).unwrap());
        let ds = js_sys::Array::from(&get(&out, "diagnostics"));
        assert_eq!(ds.length(), 0, "{name}: {:?}", get(&ds.get(0), "message"));
    }
}
