//! An inverted index over passages: term → postings (passage index, term
//! frequency), plus document lengths, the average length and the passage ids.
//!
//! Layout: compressed sparse rows. Term `t` (a dense id) owns postings
//! `offsets[t]..offsets[t + 1]` of the parallel arrays `post_docs` (passage index,
//! ascending) and `post_tfs` (term frequency ≥ 1). Document length = number of tokens
//! the [`Analyzer`] emits for the passage (after stopword removal, as in Lucene and
//! `bm25s`).
//!
//! ## File format
//!
//! [`InvertedIndex::save`] writes, in order: the 8 magic bytes `WBINVIDX`, the format
//! version ([`INDEX_FORMAT_VERSION`], `u32` little endian), then with `bincode` 1.x
//! (default options: little endian, fixed-width integers) the [`AnalyzerParams`] and
//! the index body. [`InvertedIndex::load`] checks all three before trusting the body,
//! so an index built with other analyzer settings is reported (naming the file)
//! instead of silently returning wrong scores.

use super::analyzer::{Analyzer, AnalyzerParams};
use crate::{Error, Passage, Result};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Version of the on-disk layout written by [`InvertedIndex::save`]. Bump it when the
/// body changes; older files are then rejected with a "rebuild the index" error.
pub const INDEX_FORMAT_VERSION: u32 = 1;

/// First bytes of every saved index.
const MAGIC: &[u8; 8] = b"WBINVIDX";

/// Passages analysed in parallel per block while building (bounds peak memory).
const BUILD_BLOCK: usize = 8192;

/// Which passage fields are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum IndexFields {
    /// `passage.text` only (default): the text the chunker produced.
    #[default]
    Text,
    /// `passage.title + " " + passage.text`, as Pyserini's BEIR "flat" indexes and
    /// the `bm25s` BEIR examples do.
    TitleAndText,
}

/// On-disk body (everything except the analyzer, which precedes it).
#[derive(Serialize, Deserialize)]
struct Body {
    fields: IndexFields,
    ids: Vec<String>,
    doc_lens: Vec<u32>,
    terms: Vec<String>,
    offsets: Vec<u64>,
    post_docs: Vec<u32>,
    post_tfs: Vec<u32>,
}

/// Postings of one term: parallel slices of passage indices (ascending) and term
/// frequencies.
#[derive(Debug, Clone, Copy)]
pub struct Postings<'a> {
    /// Passage indices (positions in [`InvertedIndex::ids`]), ascending.
    pub docs: &'a [u32],
    /// Term frequency in each of those passages (≥ 1).
    pub tfs: &'a [u32],
}

impl Postings<'_> {
    /// Document frequency (number of passages containing the term).
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when no passage contains the term (never the case for indexed terms).
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// An inverted index built with one [`Analyzer`]; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct InvertedIndex {
    analyzer: Analyzer,
    fields: IndexFields,
    ids: Vec<String>,
    /// `id_rank[d]` = position of `ids[d]` in ascending id order (tie-breaking).
    id_rank: Vec<u32>,
    doc_lens: Vec<u32>,
    total_len: u64,
    terms: Vec<String>,
    /// Term → id, with FxHash (a query looks up every token; the vocabulary is
    /// the index's own, so hash flooding is not a concern).
    vocab: FxHashMap<String, u32>,
    offsets: Vec<usize>,
    post_docs: Vec<u32>,
    post_tfs: Vec<u32>,
}

impl InvertedIndex {
    /// Index `passage.text` of every passage with `analyzer`.
    ///
    /// Errors: [`Error::Empty`] for an empty corpus; [`Error::BadInput`] for a
    /// duplicate passage id or a corpus of more than `u32::MAX` passages.
    pub fn build(passages: &[Passage], analyzer: &Analyzer) -> Result<Self> {
        Self::build_with_fields(passages, analyzer, IndexFields::Text)
    }

    /// Index the chosen `fields` of every passage with `analyzer`
    /// (see [`InvertedIndex::build`] for errors).
    pub fn build_with_fields(
        passages: &[Passage],
        analyzer: &Analyzer,
        fields: IndexFields,
    ) -> Result<Self> {
        if passages.is_empty() {
            return Err(Error::Empty("corpus: no passages to index".into()));
        }
        if passages.len() > u32::MAX as usize {
            return Err(Error::bad_input(
                "<passages>",
                format!(
                    "{} passages; the index holds at most {}",
                    passages.len(),
                    u32::MAX
                ),
            ));
        }
        let ids: Vec<String> = passages.iter().map(|p| p.id.clone()).collect();
        let id_rank = rank_ids(&ids)?;

        let mut vocab: FxHashMap<String, u32> = FxHashMap::default();
        let mut terms: Vec<String> = Vec::new();
        let mut postings: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut doc_lens: Vec<u32> = Vec::with_capacity(passages.len());
        let mut doc_terms: Vec<u32> = Vec::new();

        for (block_no, block) in passages.chunks(BUILD_BLOCK).enumerate() {
            let analysed: Vec<Vec<String>> = block
                .par_iter()
                .map(|p| match fields {
                    IndexFields::Text => analyzer.analyze(&p.text),
                    IndexFields::TitleAndText => {
                        let mut t = analyzer.analyze(&p.title);
                        t.extend(analyzer.analyze(&p.text));
                        t
                    }
                })
                .collect();
            for (i, tokens) in analysed.into_iter().enumerate() {
                let doc = (block_no * BUILD_BLOCK + i) as u32;
                doc_lens.push(u32::try_from(tokens.len()).unwrap_or(u32::MAX));
                doc_terms.clear();
                for tok in tokens {
                    let tid = match vocab.get(&tok) {
                        Some(&t) => t,
                        None => {
                            let t = terms.len() as u32;
                            terms.push(tok.clone());
                            vocab.insert(tok, t);
                            postings.push(Vec::new());
                            t
                        }
                    };
                    doc_terms.push(tid);
                }
                doc_terms.sort_unstable();
                let mut j = 0;
                while j < doc_terms.len() {
                    let t = doc_terms[j];
                    let mut n = 1;
                    while j + n < doc_terms.len() && doc_terms[j + n] == t {
                        n += 1;
                    }
                    postings[t as usize].push((doc, n as u32));
                    j += n;
                }
            }
        }

        let total: usize = postings.iter().map(Vec::len).sum();
        let mut offsets = Vec::with_capacity(terms.len() + 1);
        let mut post_docs = Vec::with_capacity(total);
        let mut post_tfs = Vec::with_capacity(total);
        offsets.push(0);
        for list in postings {
            for (d, tf) in list {
                post_docs.push(d);
                post_tfs.push(tf);
            }
            offsets.push(post_docs.len());
        }
        let total_len = doc_lens.iter().map(|&l| l as u64).sum();
        Ok(InvertedIndex {
            analyzer: analyzer.clone(),
            fields,
            ids,
            id_rank,
            doc_lens,
            total_len,
            terms,
            vocab,
            offsets,
            post_docs,
            post_tfs,
        })
    }

    /// Write the index to `path` (see the module docs for the format).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::new(file);
        w.write_all(MAGIC).map_err(|e| Error::io(path, e))?;
        w.write_all(&INDEX_FORMAT_VERSION.to_le_bytes())
            .map_err(|e| Error::io(path, e))?;
        let ser = |e: bincode::Error| Error::bad_input(path, format!("writing index: {e}"));
        bincode::serialize_into(&mut w, self.analyzer.params()).map_err(ser)?;
        let body = Body {
            fields: self.fields,
            ids: self.ids.clone(),
            doc_lens: self.doc_lens.clone(),
            terms: self.terms.clone(),
            offsets: self.offsets.iter().map(|&o| o as u64).collect(),
            post_docs: self.post_docs.clone(),
            post_tfs: self.post_tfs.clone(),
        };
        bincode::serialize_into(&mut w, &body).map_err(ser)?;
        w.flush().map_err(|e| Error::io(path, e))
    }

    /// Read an index written by [`InvertedIndex::save`] and check that it was built
    /// with the same analyzer settings as `analyzer`.
    ///
    /// Errors ([`Error::BadInput`] naming the file unless it is an I/O error): not an
    /// index file, another format version, analyzer settings that differ from
    /// `analyzer`'s (both are printed), or a truncated / inconsistent body.
    pub fn load(path: impl AsRef<Path>, analyzer: &Analyzer) -> Result<Self> {
        Self::read(path.as_ref(), Some(analyzer.params()))
    }

    /// Read an index with the analyzer settings stored in the file, whatever they are.
    pub fn load_any(path: impl AsRef<Path>) -> Result<Self> {
        Self::read(path.as_ref(), None)
    }

    fn read(path: &Path, expected: Option<&AnalyzerParams>) -> Result<Self> {
        use bincode::Options;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // bincode 1.x allocates a string or byte buffer of whatever length the file
        // claims; a limit of the file size turns a corrupt length into an error
        // instead of an allocation failure that aborts the process.
        let bincode_opts = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .allow_trailing_bytes()
            .with_limit(file_len);
        let mut r = BufReader::new(file);
        let mut head = [0u8; 12];
        if r.read_exact(&mut head).is_err() || &head[..8] != MAGIC {
            return Err(Error::bad_input(
                path,
                "not a workbench inverted index (missing `WBINVIDX` header)",
            ));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != INDEX_FORMAT_VERSION {
            return Err(Error::bad_input(
                path,
                format!(
                    "index format version {version}, but this build reads version {INDEX_FORMAT_VERSION}; rebuild the index"
                ),
            ));
        }
        let de = |what: &str, e: bincode::Error| {
            Error::bad_input(
                path,
                format!("reading {what}: {e} (truncated or corrupt file?)"),
            )
        };
        let params: AnalyzerParams = bincode_opts
            .deserialize_from(&mut r)
            .map_err(|e| de("analyzer settings", e))?;
        if let Some(expected) = expected {
            if &params != expected {
                return Err(Error::bad_input(
                    path,
                    format!(
                        "index was built with analyzer {params:?} but is being loaded with {expected:?}; rebuild the index or load it with the saved settings"
                    ),
                ));
            }
        }
        let analyzer = Analyzer::new(params).map_err(|e| {
            Error::bad_input(path, format!("stored analyzer settings are invalid: {e}"))
        })?;
        let body: Body = bincode_opts
            .deserialize_from(&mut r)
            .map_err(|e| de("index body", e))?;
        Self::from_body(path, analyzer, body)
    }

    /// Rebuild the in-memory index from a deserialised body, checking consistency.
    fn from_body(path: &Path, analyzer: Analyzer, body: Body) -> Result<Self> {
        let bad = |m: String| Error::bad_input(path, format!("inconsistent index: {m}"));
        let n = body.ids.len();
        if n == 0 {
            return Err(bad("no passages".into()));
        }
        if body.doc_lens.len() != n {
            return Err(bad(format!(
                "{} ids but {} lengths",
                n,
                body.doc_lens.len()
            )));
        }
        if body.offsets.len() != body.terms.len() + 1
            || body.offsets.first() != Some(&0)
            || body.offsets.last() != Some(&(body.post_docs.len() as u64))
            || body.offsets.windows(2).any(|w| w[0] > w[1])
        {
            return Err(bad("postings offsets".into()));
        }
        if body.post_tfs.len() != body.post_docs.len() {
            return Err(bad("postings arrays differ in length".into()));
        }
        if body.post_docs.iter().any(|&d| d as usize >= n) || body.post_tfs.contains(&0) {
            return Err(bad("posting out of range".into()));
        }
        let mut vocab = FxHashMap::with_capacity_and_hasher(body.terms.len(), Default::default());
        for (t, term) in body.terms.iter().enumerate() {
            if vocab.insert(term.clone(), t as u32).is_some() {
                return Err(bad(format!("term {term:?} stored twice")));
            }
        }
        let id_rank = rank_ids(&body.ids).map_err(|e| bad(e.to_string()))?;
        let total_len = body.doc_lens.iter().map(|&l| l as u64).sum();
        Ok(InvertedIndex {
            analyzer,
            fields: body.fields,
            ids: body.ids,
            id_rank,
            doc_lens: body.doc_lens,
            total_len,
            terms: body.terms,
            vocab,
            offsets: body.offsets.into_iter().map(|o| o as usize).collect(),
            post_docs: body.post_docs,
            post_tfs: body.post_tfs,
        })
    }

    /// The analyzer the index was built with (use it for queries).
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// The indexed fields.
    pub fn fields(&self) -> IndexFields {
        self.fields
    }

    /// Number of passages `N`.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Always false: an index holds at least one passage.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Passage ids, in corpus order (passage index `d` ↔ `ids()[d]`).
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Rank of each passage id in ascending id order (used to break score ties by id
    /// without comparing strings).
    pub fn id_ranks(&self) -> &[u32] {
        &self.id_rank
    }

    /// Document lengths in tokens, by passage index.
    pub fn doc_lens(&self) -> &[u32] {
        &self.doc_lens
    }

    /// Length of passage `d` in tokens.
    pub fn doc_len(&self, d: usize) -> u32 {
        self.doc_lens[d]
    }

    /// Sum of all document lengths.
    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    /// Average document length `avgdl = Σ dl / N` (0 when no passage has a token).
    pub fn avg_doc_len(&self) -> f64 {
        self.total_len as f64 / self.len() as f64
    }

    /// Vocabulary size.
    pub fn num_terms(&self) -> usize {
        self.terms.len()
    }

    /// Total number of postings (distinct (term, passage) pairs).
    pub fn num_postings(&self) -> usize {
        self.post_docs.len()
    }

    /// Terms by id.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// Dense id of an (already analysed) term.
    pub fn term_id(&self, term: &str) -> Option<u32> {
        self.vocab.get(term).copied()
    }

    /// Postings of term id `t`.
    ///
    /// Panics when `t >= num_terms()`.
    pub fn postings(&self, t: u32) -> Postings<'_> {
        let (a, b) = (self.offsets[t as usize], self.offsets[t as usize + 1]);
        Postings {
            docs: &self.post_docs[a..b],
            tfs: &self.post_tfs[a..b],
        }
    }

    /// Postings of an (already analysed) term, if indexed.
    pub fn postings_of(&self, term: &str) -> Option<Postings<'_>> {
        self.term_id(term).map(|t| self.postings(t))
    }

    /// Range of term `t`'s postings in the flat posting arrays (for per-posting
    /// side tables such as precomputed impacts).
    pub fn posting_range(&self, t: u32) -> std::ops::Range<usize> {
        self.offsets[t as usize]..self.offsets[t as usize + 1]
    }

    /// Document frequency of term id `t`.
    pub fn df(&self, t: u32) -> usize {
        self.offsets[t as usize + 1] - self.offsets[t as usize]
    }

    /// Analyse `query` with the index's analyzer and write its indexed terms into
    /// `out` as `(term id, count in the query)`, in order of first occurrence. Terms
    /// not in the vocabulary are dropped (they match nothing).
    pub fn query_terms_into(&self, query: &str, out: &mut Vec<(u32, u32)>) {
        out.clear();
        self.analyzer.for_each_token(query, |tok| {
            if let Some(t) = self.term_id(tok) {
                match out.iter_mut().find(|(u, _)| *u == t) {
                    Some((_, c)) => *c += 1,
                    None => out.push((t, 1)),
                }
            }
        });
    }

    /// [`InvertedIndex::query_terms_into`] into a new vector.
    pub fn query_terms(&self, query: &str) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        self.query_terms_into(query, &mut out);
        out
    }

    /// Passage index of the passage with id `id` (its position in
    /// [`InvertedIndex::ids`]). A linear scan: for explanations and notebooks, not
    /// for query-time use.
    ///
    /// Errors: [`Error::InvalidParam`] (`passage`) when no passage has that id.
    pub fn passage_index(&self, id: &str) -> Result<usize> {
        self.ids.iter().position(|x| x == id).ok_or_else(|| {
            Error::param(
                "passage",
                format!(
                    "no passage with id `{id}` in this index ({} passages)",
                    self.len()
                ),
            )
        })
    }

    /// Position of term `t`'s posting for passage `d` in the flat posting arrays
    /// (a binary search of the term's postings; the same position indexes
    /// per-posting side tables such as [`super::impact::Impacts::weights`]), or
    /// `None` when passage `d` does not contain `t`.
    ///
    /// Panics when `t >= num_terms()`.
    pub fn posting_position(&self, t: u32, d: usize) -> Option<usize> {
        let range = self.posting_range(t);
        let docs = &self.post_docs[range.clone()];
        docs.binary_search(&(d as u32))
            .ok()
            .map(|i| range.start + i)
    }

    /// `tf(t, d)`: how often term `t` occurs in passage `d` (0 when it does not).
    ///
    /// Panics when `t >= num_terms()`.
    pub fn tf(&self, t: u32, d: usize) -> u32 {
        self.posting_position(t, d).map_or(0, |i| self.post_tfs[i])
    }

    /// The terms of passage `d` as `(term id, tf)`, by term id. Walks the whole
    /// vocabulary (one binary search per term): for explanations of small corpora.
    pub fn passage_terms(&self, d: usize) -> Vec<(u32, u32)> {
        (0..self.num_terms() as u32)
            .filter_map(|t| self.posting_position(t, d).map(|i| (t, self.post_tfs[i])))
            .collect()
    }
}

/// Rank of each id in ascending order; errors on duplicates.
fn rank_ids(ids: &[String]) -> Result<Vec<u32>> {
    let mut order: Vec<u32> = (0..ids.len() as u32).collect();
    order.par_sort_unstable_by(|&a, &b| ids[a as usize].cmp(&ids[b as usize]));
    let mut rank = vec![0u32; ids.len()];
    for (r, w) in order.iter().enumerate() {
        rank[*w as usize] = r as u32;
    }
    if let Some(w) = order
        .windows(2)
        .find(|w| ids[w[0] as usize] == ids[w[1] as usize])
    {
        return Err(Error::bad_input(
            "<passages>",
            format!(
                "duplicate passage id `{}` (positions {} and {})",
                ids[w[0] as usize],
                w[0].min(w[1]),
                w[0].max(w[1])
            ),
        ));
    }
    Ok(rank)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A passage with the given id and text (test helper shared by sibling modules).
    pub(crate) fn passage(id: &str, text: &str) -> Passage {
        Passage {
            id: id.into(),
            doc_id: id.into(),
            title: String::new(),
            text: text.into(),
            start: 0,
            end: text.len(),
        }
    }

    fn corpus() -> Vec<Passage> {
        vec![
            passage("d1", "cats and dogs are pets."),
            passage("d2", "Dogs chase cats. Dogs bark."),
            passage("d3", "Horses are also pets."),
        ]
    }

    #[test]
    fn per_passage_lookups() {
        let idx = InvertedIndex::build(&corpus(), &Analyzer::plain()).unwrap();
        assert_eq!(idx.passage_index("d2").unwrap(), 1);
        let e = idx.passage_index("d9").unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidParam {
                    name: "passage",
                    ..
                }
            ) && e.to_string().contains("`d9`"),
            "{e}"
        );
        let dogs = idx.term_id("dogs").unwrap();
        assert_eq!(
            (idx.tf(dogs, 0), idx.tf(dogs, 1), idx.tf(dogs, 2)),
            (1, 2, 0)
        );
        assert_eq!(idx.posting_position(dogs, 2), None);
        let i = idx.posting_position(dogs, 1).unwrap();
        assert!(idx.posting_range(dogs).contains(&i));
        // "Dogs chase cats. Dogs bark.": dogs 2, chase 1, cats 1, bark 1 = 5 tokens.
        let terms: Vec<(String, u32)> = idx
            .passage_terms(1)
            .into_iter()
            .map(|(t, tf)| (idx.terms()[t as usize].clone(), tf))
            .collect();
        let mut sorted = terms.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [("bark", 1), ("cats", 1), ("chase", 1), ("dogs", 2)].map(|(t, c)| (t.to_string(), c))
        );
        assert_eq!(terms.iter().map(|x| x.1).sum::<u32>(), idx.doc_len(1));
    }

    #[test]
    fn postings_lengths_and_average() {
        let idx = InvertedIndex::build(&corpus(), &Analyzer::plain()).unwrap();
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.doc_lens(), &[5, 5, 4]);
        assert!((idx.avg_doc_len() - 14.0 / 3.0).abs() < 1e-12);
        let dogs = idx.postings_of("dogs").unwrap();
        assert_eq!(dogs.docs, &[0, 1]);
        assert_eq!(dogs.tfs, &[1, 2]);
        let pets = idx.postings_of("pets").unwrap();
        assert_eq!((pets.docs, pets.tfs), (&[0u32, 2][..], &[1u32, 1][..]));
        assert!(idx.postings_of("Dogs").is_none());
        // 9 distinct terms: cats and dogs are pets | chase bark | horses also.
        assert_eq!(idx.num_terms(), 9);
        // distinct terms per passage: 5 + 4 (dogs chase cats bark) + 4.
        assert_eq!(idx.num_postings(), 5 + 4 + 4);
        let q = idx.query_terms("dogs DOGS pets unknown");
        assert_eq!(
            q,
            vec![
                (idx.term_id("dogs").unwrap(), 2),
                (idx.term_id("pets").unwrap(), 1)
            ]
        );
    }

    #[test]
    fn title_and_text_fields() {
        let mut c = corpus();
        c[2].title = "Horse facts".into();
        let idx =
            InvertedIndex::build_with_fields(&c, &Analyzer::plain(), IndexFields::TitleAndText)
                .unwrap();
        assert_eq!(idx.doc_len(2), 6);
        assert_eq!(idx.postings_of("facts").unwrap().docs, &[2]);
    }

    #[test]
    fn empty_corpus_and_duplicate_ids_are_errors() {
        assert!(matches!(
            InvertedIndex::build(&[], &Analyzer::default()),
            Err(Error::Empty(_))
        ));
        let mut c = corpus();
        c[2].id = "d1".into();
        let e = InvertedIndex::build(&c, &Analyzer::default()).unwrap_err();
        assert!(e.to_string().contains("duplicate passage id `d1`"), "{e}");
    }

    #[test]
    fn id_ranks_order_ids() {
        let c = vec![passage("b", "x"), passage("a", "x"), passage("c", "x")];
        let idx = InvertedIndex::build(&c, &Analyzer::plain()).unwrap();
        assert_eq!(idx.id_ranks(), &[1, 0, 2]);
    }

    #[test]
    fn save_load_round_trip_and_analyzer_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx.bin");
        let idx = InvertedIndex::build(&corpus(), &Analyzer::default()).unwrap();
        idx.save(&path).unwrap();

        let back = InvertedIndex::load(&path, &Analyzer::default()).unwrap();
        assert_eq!(back.ids(), idx.ids());
        assert_eq!(back.doc_lens(), idx.doc_lens());
        assert_eq!(back.terms(), idx.terms());
        for t in 0..idx.num_terms() as u32 {
            assert_eq!(back.postings(t).docs, idx.postings(t).docs);
            assert_eq!(back.postings(t).tfs, idx.postings(t).tfs);
        }
        assert_eq!(back.analyzer(), idx.analyzer());
        assert_eq!(InvertedIndex::load_any(&path).unwrap().terms(), idx.terms());

        let e = InvertedIndex::load(&path, &Analyzer::plain()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::BadInput { .. }));
        assert!(msg.contains("idx.bin") && msg.contains("analyzer"), "{msg}");
    }

    #[test]
    fn load_rejects_foreign_truncated_and_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx.bin");
        let idx = InvertedIndex::build(&corpus(), &Analyzer::default()).unwrap();
        idx.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();

        let other = dir.path().join("other.bin");
        std::fs::write(&other, b"hello world, not an index").unwrap();
        let e = InvertedIndex::load_any(&other).unwrap_err().to_string();
        assert!(e.contains("other.bin") && e.contains("WBINVIDX"), "{e}");

        let mut v2 = bytes.clone();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&other, &v2).unwrap();
        let e = InvertedIndex::load_any(&other).unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");

        std::fs::write(&other, &bytes[..bytes.len() - 7]).unwrap();
        let e = InvertedIndex::load_any(&other).unwrap_err().to_string();
        assert!(e.contains("other.bin") && e.contains("index body"), "{e}");

        let missing = dir.path().join("missing.bin");
        assert!(matches!(
            InvertedIndex::load_any(&missing),
            Err(Error::Io { .. })
        ));
    }
}
