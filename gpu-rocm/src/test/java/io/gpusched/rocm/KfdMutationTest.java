package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real librocm_smi 5.2.3 plus our provider never kill the process, whatever one file or directory of a captured
 * KFD tree looks like. Each file of each tree is removed, emptied, truncated, garbled and blanked, each directory
 * removed, emptied and replaced by a file, one at a time, in batches inside a child JVM that sees the tree at the real
 * /sys/class/kfd path ({@link KfdNamespace}). For each mutation the child asks the provider with the KFD check on and
 * the child probe off, so the library runs in that JVM whenever the check lets it: a child that dies there fails the
 * test with the mutation named, and the parent goes on after it. Mutations the check refuses are run through the bare
 * library in a C child, which counts the aborts the check saved us from (and the refusals that were not needed).
 *
 * <p>Two children run at once, each over one half of a tree's mutations on its own copy of the tree.
 *
 * <p>Trees: our own under src/test/resources/kfd and the captures copied to src/test/resources/fixtures/amd. To stay near a minute,
 * {@code caches/<n>} beyond {@code caches/0} are left out (neither the library nor gpusched opens them), and the 34-node
 * MI308 capture (each rsmi_init reads its 6,000 files, ~100 ms) is mutated on its top-level files (not {@code nodes/}
 * as a whole, which the other trees cover) and on GPU node 2 (its
 * io_links 0, 1 and 10: PCIe, same-package and cross-package XGMI); {@code -Dgpusched.kfd.mutations=full} takes
 * every entry of every tree.
 */
@Tag("native")
class KfdMutationTest {

    /** Counts of one run. */
    static final class Tally {
        int tried;
        int served;
        int refused;
        int bareAborts;
        int refusedNeedlessly;
        int childStarts;
        final Map<String, Integer> bareByExit = new TreeMap<>();
        final List<String> providerAborts = new ArrayList<>();
        final List<String> needless = new ArrayList<>();

        @Override
        public String toString() {
            return "tried=" + tried + " served=" + served + " refused=" + refused + " bareAborts=" + bareAborts
                    + " bareByExit=" + bareByExit + " refusedNeedlessly=" + refusedNeedlessly + " providerAborts="
                    + providerAborts.size() + " childJvms=" + childStarts;
        }
    }

    @Test
    void noMutationOfACapturedTreeKillsTheProcess(@TempDir Path tmp) throws Exception {
        assumeTrue(KfdNamespace.unavailableReason().isEmpty(),
                () -> "skipped: " + KfdNamespace.unavailableReason().get());
        Optional<Path> bare = KfdNamespace.bareProbe(tmp);
        boolean full = "full".equals(System.getProperty("gpusched.kfd.mutations"));
        // caches/<n> beyond the first: neither librocm_smi 5.2.3 (seen with strace) nor gpusched opens them, and each
        // capture has dozens per node; the MI308 capture (~100 ms per rsmi_init) keeps one GPU node of each shape
        Predicate<String> fewCaches = full ? x -> true : x -> !x.matches(".*/caches/[1-9][0-9]*(/.*)?");
        Map<String, Tree> trees = new LinkedHashMap<>();
        Path own = Path.of("src/test/resources/kfd");
        try (var s = Files.list(own)) {
            for (Path t : s.sorted().toList()) {
                trees.put("own/" + t.getFileName(), new Tree(t, x -> true));
            }
        }
        Path captures = KfdFixtures.CAPTURES;
        assertThat(captures).as("the captures copied into the module").isDirectory();
        trees.put("mi210-xgmi", new Tree(captures.resolve("topo-mi210-xgmi-pcie"), x -> true));
        trees.put("vega10-dup", new Tree(captures.resolve("topology-parsing/topology"), fewCaches));
        trees.put("mi300-cpx", new Tree(captures.resolve("topo-mi300-cpx/topology"), x -> true));
        trees.put("mi308-cpx", new Tree(captures.resolve("topology-parsing-mi308/topology"), full ? x -> true
                : fewCaches.and(x -> !x.equals("nodes"))
                        .and(x -> !x.startsWith("nodes/") || x.matches("nodes/2(/.*)?"))
                        .and(x -> !x.matches("nodes/2/io_links/.*") || x.matches("nodes/2/io_links/(0|1|10)(/.*)?"))));
        assertThat(trees).as("own trees under " + own.toAbsolutePath()).hasSizeGreaterThanOrEqualTo(5);
        // two children at once (the surefire JVM mostly waits on them): each tree's list in two halves, each half
        // mutating its own copy of the tree (a child changes its tree in place) in its own mount namespace
        List<Half> halves = new ArrayList<>();
        for (Map.Entry<String, Tree> e : trees.entrySet()) {
            Path a = KfdNamespace.copy(e.getValue().root(), tmp.resolve("trees/" + e.getKey() + "/a"));
            Path b = KfdNamespace.copy(e.getValue().root(), tmp.resolve("trees/" + e.getKey() + "/b"));
            List<KfdChild.Mutation> ms = KfdChild.Mutation.all(a, e.getValue().filter());
            Path list = tmp.resolve(e.getKey().replace('/', '_') + ".mutations");
            Files.write(list, ms.stream().map(KfdChild.Mutation::line).toList());
            halves.add(new Half(e.getKey(), a, ms, list, 0, ms.size() / 2));
            halves.add(new Half(e.getKey(), b, ms, list, ms.size() / 2, ms.size()));
        }
        ExecutorService pool = Executors.newFixedThreadPool(2);
        Map<String, List<Future<Tally>>> runs = new LinkedHashMap<>();
        long t0 = System.nanoTime();
        try {
            for (Half h : halves) {
                runs.computeIfAbsent(h.name(), k -> new ArrayList<>()).add(pool.submit(() -> run(h, bare)));
            }
            Tally all = new Tally();
            StringBuilder report = new StringBuilder();
            for (Map.Entry<String, List<Future<Tally>>> e : runs.entrySet()) {
                Tally t = new Tally();
                for (Future<Tally> f : e.getValue()) {
                    add(t, f.get());
                }
                report.append(e.getKey()).append(": ").append(t).append('\n');
                add(all, t);
            }
            report.append("all: ").append(all).append(" (").append((System.nanoTime() - t0) / 1_000_000)
                    .append(" ms)");
            System.out.println("KFD mutation test (bare library " + (bare.isPresent() ? "run" : "not run: no gcc")
                    + ")\n" + report);
            assertThat(all.providerAborts).as("mutations that killed the provider's process\n" + report).isEmpty();
            assertThat(all.tried).isGreaterThan(1000);
            if (bare.isPresent()) {
                assertThat(all.bareAborts).as("the bare library does die on some mutations: the test can see an abort")
                        .isPositive();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    private static void add(Tally into, Tally t) {
        into.tried += t.tried;
        into.served += t.served;
        into.refused += t.refused;
        into.bareAborts += t.bareAborts;
        into.refusedNeedlessly += t.refusedNeedlessly;
        into.childStarts += t.childStarts;
        t.bareByExit.forEach((k, v) -> into.bareByExit.merge(k, v, Integer::sum));
        into.providerAborts.addAll(t.providerAborts);
        into.needless.addAll(t.needless);
    }

    /** Mutations {@code from} (inclusive) to {@code to} (exclusive) of {@code ms}, listed in {@code list}. */
    record Half(String name, Path tree, List<KfdChild.Mutation> ms, Path list, int from, int to) {
    }

    record Tree(Path root, Predicate<String> filter) {
    }

    private static Tally run(Half h, Optional<Path> bare) throws Exception {
        String name = h.name();
        Path tree = h.tree();
        List<KfdChild.Mutation> ms = h.ms();
        Tally t = new Tally();
        int next = h.from();
        while (next < h.to()) {
            t.childStarts++;
            Process p = new ProcessBuilder(KfdNamespace.command(tree, KfdNamespace.java(KfdChild.class.getName(),
                    "mutate", tree.toString(), h.list().toString(), String.valueOf(next),
                    bare.map(Path::toString).orElse("-"), String.valueOf(h.to())))).redirectInput(new File("/dev/null"))
                    .start();
            var err = new java.util.concurrent.CompletableFuture<String>();
            KfdNamespace.drain(p.getErrorStream(), err);
            int begun = -1;
            int ended = next - 1;
            boolean done = false;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                for (String line; (line = r.readLine()) != null;) {
                    String[] f = line.split(" ", 4);
                    switch (f[0]) {
                        case "begin" -> begun = Integer.parseInt(f[1]);
                        case "end" -> ended = Integer.parseInt(f[1]);
                        case "served" -> {
                            t.tried++;
                            t.served++;
                        }
                        case "refused" -> {
                            t.tried++;
                            t.refused++;
                            String rc = f[2];
                            if (rc.matches("1[2-5][0-9]") || rc.equals("timeout")) {
                                t.bareAborts++;
                                t.bareByExit.merge(rc, 1, Integer::sum);
                            } else if (!rc.equals("-")) {
                                t.refusedNeedlessly++;
                                t.needless.add(
                                        name + " " + ms.get(Integer.parseInt(f[1])).line() + " (bare exit " + rc + ")");
                            }
                        }
                        case "done" -> done = true;
                        default -> {
                        }
                    }
                }
            }
            if (!p.waitFor(300, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
            }
            if (done) {
                break;
            }
            if (begun > ended) {
                t.tried++;
                t.providerAborts.add(name + " " + ms.get(begun).line() + " -> exit " + p.exitValue() + ": "
                        + err.join().lines().filter(l -> !l.isBlank()).reduce((a, b) -> b).orElse(""));
                next = begun + 1;
            } else {
                throw new AssertionError("mutation child for " + name + " stopped after " + ended + " without an abort"
                        + " in a mutation (exit " + p.exitValue() + "): " + err.join());
            }
        }
        return t;
    }
}
