//! Embeds every `examples/*.cot` at the repository root into the wasm (`examples()`), sorted by name.
use std::{env, fs, path::PathBuf};

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("..").join("examples");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files: Vec<PathBuf> = fs::read_dir(&root)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "cot")).collect())
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("pub static EXAMPLES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_stem().unwrap().to_string_lossy();
        let abs = fs::canonicalize(f).unwrap();
        out.push_str(&format!("    ({:?}, include_str!({:?})),\n", name, abs.display().to_string()));
    }
    out.push_str("];\n");
    fs::write(PathBuf::from(env::var("OUT_DIR").unwrap()).join("examples.rs"), out).unwrap();
}
