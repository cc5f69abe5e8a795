// BM25 peer: Lucene's own IndexSearcher.search on one thread, timing only the search.
//
// Compiled and run by scripts/python/bench_lucene.py (javac --release 11 against the Anserini
// fat jar, which holds Lucene 9.9.1; the class files are cached in $WORKBENCH_HOME by this
// file's sha256, never committed). By hand:
//
//   javac --release 11 -cp anserini-1.7.1-fatjar.jar -d OUT scripts/java/LuceneSearchBench.java
//   java -cp anserini-1.7.1-fatjar.jar:OUT LuceneSearchBench --index DIR --queries FILE \
//       [--k1 0.9] [--b 0.4] [--k 10] [--warmup 30] [--warmup-seconds 0] [--repeats 20]
//       [--total-hits-threshold N]
//
// --index: a Lucene index whose field `contents` holds the analysed tokens (Anserini's
// IndexCollection with -pretokenized). --queries: one query a line, `id<TAB>tokens`, the tokens
// already analysed and separated by single spaces (the same analysis as the index's).
//
// Each query is a BooleanQuery of one SHOULD TermQuery on `contents` per token, a repeated token
// repeated as a clause (as Anserini's BagOfWordsQueryGenerator builds it), all built before any
// timing. The IndexSearcher has no executor, so every search runs on the calling (main) thread;
// its similarity is BM25Similarity(k1, b). Without --total-hits-threshold each search is
// searcher.search(query, k), which counts the first 1,000 matching documents exactly before it
// starts skipping; with it, a TopScoreDocCollector.create(k, N) collects (N = k: skip as soon as
// the top k allow, what a top-k search needs). `--warmup` untimed passes over all queries (the JIT),
// more while fewer than `--warmup-seconds` have passed since the first (so that a fast pass over
// a small index still gives the JIT the same time as a slow one), then `--repeats` timed passes, each calling only searcher.search(query, k) for every query in
// turn: wall time by System.nanoTime, CPU time of this thread by
// ThreadMXBean.getCurrentThreadCpuTime, and, for comparison, the CPU time of the whole JVM
// (its GC and JIT threads too). Every timed pass must return the warm-up's documents.
//
// Output: one JSON object on stdout: queries/s as the median over the timed passes (and
// min/max), queries per CPU-second of the searching thread (total queries / total thread CPU
// time) and of the JVM, the per-pass times, and top10 = {query id: [the `id` field of the
// first min(k, 10) hits]}, read from stored fields after the timing, and top10_scores, their
// scores.

import java.io.BufferedReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.TopScoreDocCollector;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.Version;

public final class LuceneSearchBench {
  private static final String FIELD = "contents";
  private static final String ID = "id";

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = parseArgs(argv);
    String index = required(a, "--index");
    String queriesPath = required(a, "--queries");
    float k1 = Float.parseFloat(a.getOrDefault("--k1", "0.9"));
    float b = Float.parseFloat(a.getOrDefault("--b", "0.4"));
    int k = Integer.parseInt(a.getOrDefault("--k", "10"));
    int warmup = Integer.parseInt(a.getOrDefault("--warmup", "30"));
    double warmupSeconds = Double.parseDouble(a.getOrDefault("--warmup-seconds", "0"));
    int threshold = Integer.parseInt(a.getOrDefault("--total-hits-threshold", "0"));
    int repeats = Integer.parseInt(a.getOrDefault("--repeats", "20"));
    if (k < 1 || warmup < 1 || repeats < 1) {
      fail("--k, --warmup and --repeats must be at least 1");
    }

    List<String> qids = new ArrayList<>();
    List<Query> queries = new ArrayList<>();
    long clauses = 0;
    try (BufferedReader r = Files.newBufferedReader(Paths.get(queriesPath), StandardCharsets.UTF_8)) {
      String line;
      int no = 0;
      while ((line = r.readLine()) != null) {
        no++;
        int tab = line.indexOf('\t');
        if (tab < 0) {
          fail(queriesPath + ":" + no + ": no tab between the query id and its tokens");
        }
        qids.add(line.substring(0, tab));
        BooleanQuery.Builder q = new BooleanQuery.Builder();
        String tokens = line.substring(tab + 1);
        if (!tokens.isEmpty()) {
          for (String t : tokens.split(" ", -1)) {
            if (t.isEmpty()) {
              fail(queriesPath + ":" + no + ": an empty token");
            }
            q.add(new TermQuery(new Term(FIELD, t)), BooleanClause.Occur.SHOULD);
            clauses++;
          }
        }
        queries.add(q.build());
      }
    }
    int n = queries.size();
    if (n == 0) {
      fail(queriesPath + ": no queries");
    }

    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    if (!threads.isCurrentThreadCpuTimeSupported()) {
      fail("this JVM cannot measure a thread's CPU time");
    }
    threads.setThreadCpuTimeEnabled(true);
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    com.sun.management.OperatingSystemMXBean jvmCpu =
        os instanceof com.sun.management.OperatingSystemMXBean ? (com.sun.management.OperatingSystemMXBean) os : null;

    try (FSDirectory dir = FSDirectory.open(Paths.get(index));
        DirectoryReader reader = DirectoryReader.open(dir)) {
      IndexSearcher searcher = new IndexSearcher(reader); // no executor: searches run on this thread
      searcher.setSimilarity(new BM25Similarity(k1, b));

      TopDocs[] first = new TopDocs[n];
      TopDocs[] hits = new TopDocs[n];
      long warm0 = System.nanoTime();
      int warmed = 0;
      while (warmed < warmup || (System.nanoTime() - warm0) / 1e9 < warmupSeconds) {
        for (int i = 0; i < n; i++) {
          hits[i] = search(searcher, queries.get(i), k, threshold);
        }
        if (warmed == 0) {
          System.arraycopy(hits, 0, first, 0, n);
        }
        warmed++;
      }
      double warmedSeconds = (System.nanoTime() - warm0) / 1e9;

      double[] wall = new double[repeats];
      double[] cpu = new double[repeats];
      double jvmCpuTotal = 0;
      for (int p = 0; p < repeats; p++) {
        long j0 = jvmCpu != null ? jvmCpu.getProcessCpuTime() : 0;
        long c0 = threads.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
          hits[i] = search(searcher, queries.get(i), k, threshold);
        }
        long t1 = System.nanoTime();
        long c1 = threads.getCurrentThreadCpuTime();
        long j1 = jvmCpu != null ? jvmCpu.getProcessCpuTime() : 0;
        wall[p] = (t1 - t0) / 1e9;
        cpu[p] = (c1 - c0) / 1e9;
        jvmCpuTotal += (j1 - j0) / 1e9;
        for (int i = 0; i < n; i++) {
          if (!sameDocs(hits[i], first[i])) {
            fail("query " + qids.get(i) + ": timed pass " + (p + 1) + " returned other documents than the warm-up");
          }
        }
      }

      StoredFields stored = searcher.storedFields();
      Set<String> idOnly = Collections.singleton(ID);
      StringBuilder top = new StringBuilder("{");
      StringBuilder topScores = new StringBuilder("{");
      for (int i = 0; i < n; i++) {
        if (i > 0) {
          top.append(", ");
          topScores.append(", ");
        }
        top.append(str(qids.get(i))).append(": [");
        topScores.append(str(qids.get(i))).append(": [");
        ScoreDoc[] sd = first[i].scoreDocs;
        for (int j = 0; j < Math.min(sd.length, 10); j++) {
          if (j > 0) {
            top.append(", ");
            topScores.append(", ");
          }
          top.append(str(stored.document(sd[j].doc, idOnly).get(ID)));
          topScores.append((double) sd[j].score); // the float's exact value
        }
        top.append("]");
        topScores.append("]");
      }
      top.append("}");
      topScores.append("}");

      double[] sorted = wall.clone();
      Arrays.sort(sorted);
      double med = repeats % 2 == 1 ? sorted[repeats / 2] : (sorted[repeats / 2 - 1] + sorted[repeats / 2]) / 2;
      double cpuTotal = Arrays.stream(cpu).sum();
      StringBuilder o = new StringBuilder("{");
      o.append("\"java\": ").append(str(System.getProperty("java.version")));
      o.append(", \"java_vm\": ").append(str(System.getProperty("java.vm.name")));
      o.append(", \"lucene_version\": ").append(str(Version.LATEST.toString()));
      o.append(", \"available_processors\": ").append(Runtime.getRuntime().availableProcessors());
      o.append(", \"segments\": ").append(reader.leaves().size());
      o.append(", \"num_docs\": ").append(reader.numDocs());
      o.append(", \"num_queries\": ").append(n);
      o.append(", \"clauses\": ").append(clauses);
      o.append(", \"similarity\": ").append(str(searcher.getSimilarity().toString()));
      o.append(", \"executor\": ").append(executor(searcher));
      o.append(", \"k\": ").append(k);
      o.append(", \"total_hits_threshold\": ").append(threshold > 0 ? threshold : 1000);
      o.append(", \"warmup\": ").append(warmed);
      o.append(", \"warmup_seconds\": ").append(round2(warmedSeconds));
      o.append(", \"repeats\": ").append(repeats);
      o.append(", \"qps\": ").append(round2(n / med));
      o.append(", \"qps_min\": ").append(round2(n / sorted[repeats - 1]));
      o.append(", \"qps_max\": ").append(round2(n / sorted[0]));
      o.append(", \"qps_cpu\": ").append(round2((double) n * repeats / cpuTotal));
      o.append(", \"qps_jvm_cpu\": ").append(jvmCpu != null ? Double.toString(round2((double) n * repeats / jvmCpuTotal)) : "null");
      o.append(", \"pass_seconds\": ").append(list(wall));
      o.append(", \"pass_cpu_seconds\": ").append(list(cpu));
      o.append(", \"top10\": ").append(top);
      o.append(", \"top10_scores\": ").append(topScores);
      o.append("}");
      System.out.println(o);
    }
  }

  /** The searcher's executor as JSON: null when it has none (every search on the calling thread). */
  @SuppressWarnings("deprecation") // getExecutor is the one accessor that tells "none" apart
  private static String executor(IndexSearcher searcher) {
    return searcher.getExecutor() == null ? "null" : str(searcher.getExecutor().toString());
  }

  /** One search: IndexSearcher.search(query, k), or a collector with this total-hits threshold. */
  static TopDocs search(IndexSearcher searcher, Query q, int k, int threshold) throws java.io.IOException {
    if (threshold <= 0) {
      return searcher.search(q, k);
    }
    TopScoreDocCollector c = TopScoreDocCollector.create(k, threshold);
    searcher.search(q, c);
    return c.topDocs();
  }

  private static boolean sameDocs(TopDocs x, TopDocs y) {
    if (x.scoreDocs.length != y.scoreDocs.length) {
      return false;
    }
    for (int i = 0; i < x.scoreDocs.length; i++) {
      if (x.scoreDocs[i].doc != y.scoreDocs[i].doc) {
        return false;
      }
    }
    return true;
  }

  private static Map<String, String> parseArgs(String[] argv) {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i < argv.length; i += 2) {
      if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
        fail("arguments are --name value pairs; got " + Arrays.toString(argv));
      }
      a.put(argv[i], argv[i + 1]);
    }
    for (String key : a.keySet()) {
      if (!Arrays.asList("--index", "--queries", "--k1", "--b", "--k", "--warmup", "--warmup-seconds", "--repeats", "--total-hits-threshold").contains(key)) {
        fail("unknown argument " + key);
      }
    }
    return a;
  }

  private static String required(Map<String, String> a, String key) {
    String v = a.get(key);
    if (v == null) {
      fail(key + " is required");
    }
    return v;
  }

  private static void fail(String message) {
    System.err.println("LuceneSearchBench: " + message);
    System.exit(2);
  }

  private static double round2(double x) {
    return Math.round(x * 100) / 100.0;
  }

  private static String list(double[] xs) {
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < xs.length; i++) {
      if (i > 0) {
        s.append(", ");
      }
      s.append(Math.round(xs[i] * 1e6) / 1e6);
    }
    return s.append("]").toString();
  }

  /** A JSON string literal. */
  private static String str(String s) {
    StringBuilder o = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        o.append('\\').append(c);
      } else if (c < 0x20) {
        o.append(String.format("\\u%04x", (int) c));
      } else {
        o.append(c);
      }
    }
    return o.append('"').toString();
  }
}
