//! The C SDK's bindings (`sdk/c/bindings/`) are generated from `wit/` and
//! committed, so that building a C operator needs no bindings generator.
//! `scripts/c-bindings` regenerates them and records the SHA-256 of every
//! WIT file they came from in `wit.sha256` (`sha256sum` format); this test
//! fails when `wit/` no longer matches, so a WIT change cannot leave the C
//! operators on a stale contract.

use sha2::{Digest, Sha256};
use weir_tests::repo_root;

#[test]
fn the_c_bindings_were_generated_from_the_current_wit() {
    let root = repo_root();
    let mut files: Vec<String> = std::fs::read_dir(root.join("wit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wit"))
        .collect();
    files.sort();
    assert!(files.len() > 5, "wit/ has its files: {files:?}");
    let current: String = files
        .iter()
        .map(|f| {
            let hash = Sha256::digest(std::fs::read(root.join("wit").join(f)).unwrap());
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}  wit/{f}\n")
        })
        .collect();
    let recorded = std::fs::read_to_string(root.join("sdk/c/bindings/wit.sha256")).unwrap();
    assert_eq!(
        recorded, current,
        "wit/ changed since sdk/c/bindings/ were generated: run scripts/c-bindings and commit the result"
    );
}
