//! The same jobs with operators in different languages give the same
//! results: the word-count example with its counter in Rust and in Python
//! (behind the Rust tokenizer, so that job mixes both).

use super::support::final_counts;
use weir_tests::{repo_root, run_example};

#[test]
fn word_count_gives_the_same_counts_with_a_rust_and_a_python_counter() {
    let mut results = Vec::new();
    for example in ["word-count", "word-count-py"] {
        let job = repo_root().join("guest-examples").join(example).join("job.toml");
        let out = run_example(&job, &[]);
        assert!(out.status.success(), "{example}: {}", String::from_utf8_lossy(&out.stderr));
        let counts = std::fs::read_to_string(job.parent().unwrap().join("output/counts.txt")).unwrap();
        results.push((example, final_counts(&counts), counts.lines().count()));
    }
    let (rust, python) = (&results[0], &results[1]);
    assert!(rust.1.len() > 10, "the example has words: {:?}", rust.1);
    assert_eq!(rust.1, python.1, "final counts per word");
    assert_eq!(rust.2, python.2, "one line per word occurrence in both");
}
