//! Evaluation: ranking metrics, QA metrics, significance tests, TREC files.
