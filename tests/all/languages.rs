//! The same jobs with operators in different languages give the same
//! results: the word-count example in Rust, in Python, in JavaScript, and
//! mixed (the Python tokenizer feeding the Rust counter).

use super::support::final_counts;
use weir_tests::{repo_root, run_example};

#[test]
fn word_count_gives_the_same_counts_in_rust_python_javascript_and_mixed() {
    let mut results = Vec::new();
    for (job, output) in [
        ("word-count/job.toml", "word-count/output/counts.txt"),
        ("word-count-py/job.toml", "word-count-py/output/counts.txt"),
        ("word-count-py/mixed.toml", "word-count-py/output/mixed-counts.txt"),
        ("word-count-js/job.toml", "word-count-js/output/counts.txt"),
    ] {
        let examples = repo_root().join("guest-examples");
        let out = run_example(&examples.join(job), &[]);
        assert!(out.status.success(), "{job}: {}", String::from_utf8_lossy(&out.stderr));
        let counts = std::fs::read_to_string(examples.join(output)).unwrap();
        results.push((job, final_counts(&counts), counts.lines().count()));
    }
    let rust = &results[0];
    assert!(rust.1.len() > 10, "the example has words: {:?}", rust.1);
    for other in &results[1..] {
        assert_eq!(rust.1, other.1, "final counts per word: {} against {}", rust.0, other.0);
        assert_eq!(rust.2, other.2, "one line per word occurrence: {} against {}", rust.0, other.0);
    }
}
