//! The top-n example: a sliding window kept by state TTL. The views of one
//! category are at most 1 s apart or at least 3.5 s apart, so each is clearly
//! in or out of the 2 s window on a busy machine too.

use weir_tests::repo_root;

#[test]
fn old_views_leave_the_window_and_stay_in_the_all_time_counts() {
    let dir = repo_root().join("guest-examples/top-n");
    for p in ["1", "3"] {
        let output = weir_tests::run_example(&dir.join("job.toml"), &["--parallelism", p]);
        assert!(output.status.success(), "{}", weir_tests::stderr(&output));
        let out = std::fs::read_to_string(dir.join("output/trending.txt")).unwrap();
        let news: Vec<&str> = out.lines().filter(|l| l.starts_with("news ")).collect();
        assert_eq!(
            news,
            vec![
                "news recent=election:1 all=election:1",
                "news recent=election:2 all=election:2",
                "news recent=election:2,weather:1 all=election:2,weather:1",
                // 3.5 s later: the first three views left the window.
                "news recent=weather:1 all=election:2,weather:2",
            ],
            "parallelism {p}"
        );
        assert_eq!(out.lines().filter(|l| l.starts_with("sport ")).count(), 6);
    }
}
