//! The same jobs with operators in different languages give the same
//! results: the word-count example in Rust, in Python, in JavaScript, with
//! the counter in C, and mixed (the Python tokenizer feeding the Rust
//! counter).

use super::example_copy::ExampleCopy;
use super::support::final_counts;

#[test]
fn word_count_gives_the_same_counts_in_rust_python_javascript_c_and_mixed() {
    let mut results = Vec::new();
    // Each in a temporary copy of its example (the Python, JavaScript and C
    // jobs read the word-count example's input beside them).
    for (example, job, output) in [
        ("word-count", "job.toml", "counts.txt"),
        ("word-count-py", "job.toml", "counts.txt"),
        ("word-count-py", "mixed.toml", "mixed-counts.txt"),
        ("word-count-js", "job.toml", "counts.txt"),
        ("word-count-js", "spidermonkey.toml", "counts-spidermonkey.txt"),
        ("word-count-c", "job.toml", "counts.txt"),
    ] {
        let copy = ExampleCopy::with_siblings(example, &["word-count"]);
        copy.run(job, &[]);
        let counts = copy.take_output(output);
        results.push((format!("{example}/{job}"), final_counts(&counts), counts.lines().count()));
    }
    let rust = &results[0];
    assert!(rust.1.len() > 10, "the example has words: {:?}", rust.1);
    for other in &results[1..] {
        assert_eq!(rust.1, other.1, "final counts per word: {} against {}", rust.0, other.0);
        assert_eq!(rust.2, other.2, "one line per word occurrence: {} against {}", rust.0, other.0);
    }
}
