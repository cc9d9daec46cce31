package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Waiting across processes on one node ledger. Child JVMs ({@link FairnessChild}) log what they were given; the test
 * judges from their logs and from the ledger file's sequence numbers (ids are {@code <prefix>-<sequence>}), never by
 * asking a scheduler whether it was fair. The waiters directory is only watched to know when a waiter waits.
 */
class CrossProcessFairnessTest {
    static final String TWO_GPUS = """
            node: two
            description: 2x A100 on one PCIe switch
            defaults: {vendor: NVIDIA, name: NVIDIA A100-PCIE-40GB, memory: 40GiB, compute_capability: "8.0"}
            devices:
              - {index: 0, pci_bus_id: "00000000:17:00.0", numa_node: 0, pcie_switch: sw0}
              - {index: 1, pci_bus_id: "00000000:18:00.0", numa_node: 0, pcie_switch: sw0}
            """;

    static Process child(String mode, Path dir, Path yaml, Path log, Path stop, int count) throws IOException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return new ProcessBuilder(java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp",
                System.getProperty("java.class.path"), FairnessChild.class.getName(), mode, dir.toString(),
                yaml.toString(), log.toString(), stop.toString(), String.valueOf(count)).redirectErrorStream(true)
                .redirectOutput(log.resolveSibling(log.getFileName() + ".out").toFile()).start();
    }

    static List<String> lines(Path log) throws IOException {
        if (!Files.exists(log)) {
            return List.of();
        }
        String text = Files.readString(log);
        int end = text.lastIndexOf('\n');
        return end < 0 ? List.of() : List.of(text.substring(0, end).split("\n")); // a line being written is left out
    }

    static long count(Path log, String prefix) throws IOException {
        return lines(log).stream().filter(l -> l.startsWith(prefix)).count();
    }

    static long seq(String id) {
        return Long.parseLong(id.substring(id.lastIndexOf('-') + 1));
    }

    /** The sequence of the last complete record in the ledger file, read by hand. */
    static long lastSequence(Path ledger) throws IOException {
        String text = Files.readString(ledger);
        String[] ls = text.substring(0, text.lastIndexOf('\n')).split("\n");
        return ls.length < 2 ? 0 : Long.parseLong(ls[ls.length - 1].split(" ", 2)[0]);
    }

    static List<String> tickets(Path dir) throws IOException {
        Path w = dir.resolve("waiters");
        if (!Files.isDirectory(w)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(w)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    static long pid(Path log) throws IOException {
        return Long.parseLong(lines(log).get(0).split(" ")[1]);
    }

    /** Waits (bounded by the test's timeout) until the process has a ticket in the waiters directory. */
    static void awaitTicketOf(Process p, Path log, Path dir) throws Exception {
        while (lines(log).isEmpty()) {
            assertThat(p.isAlive()).as("child runs: %s", Files.readString(log.resolveSibling(log.getFileName()
                    + ".out"))).isTrue();
            Thread.sleep(5);
        }
        String mark = "-" + pid(log) + "-";
        while (tickets(dir).stream().noneMatch(t -> t.contains(mark))) {
            assertThat(p.isAlive()).as("waiter runs; log %s", lines(log)).isTrue();
            assertThat(lines(log)).as("the waiter cannot be served while the test holds a GPU").noneMatch(
                    l -> l.startsWith("G") || l.startsWith("T"));
            Thread.sleep(5);
        }
    }

    /** @return the sequences of the grants ("A " lines) a child logged strictly between two ledger sequences */
    static List<Long> grantsBetween(Path log, long after, long before) throws Exception {
        return lines(log).stream().filter(l -> l.startsWith("A ")).map(l -> seq(l.substring(2)))
                .filter(x -> x > after && x < before).toList();
    }

    static GpuScheduler scheduler(Path dir, Path yaml) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated(yaml.toString())).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    /**
     * Process A waits for both GPUs of a 2-GPU node while process B allocates and releases one GPU as fast as it can.
     * Once A waits, B is granted nothing until A is served: A is served after at most B's one release of the GPU it
     * held, and B works again once A released.
     */
    @Test
    @Timeout(value = 3, unit = TimeUnit.MINUTES)
    void aWaiterForTheWholeNodeIsNotStarvedByAnotherProcessLoop(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path yaml = tmp.resolve("two.yaml");
        Files.writeString(yaml, TWO_GPUS);
        Path stop = tmp.resolve("stop");
        Path stopA = tmp.resolve("stopA");
        Path logA = tmp.resolve("a.log");
        Path logB = tmp.resolve("b.log");
        Process a = null;
        Process b = null;
        try (GpuScheduler test = scheduler(dir, yaml)) {
            b = child("loop", dir, yaml, logB, stop, 1);
            while (count(logB, "A ") < 20) {
                assertThat(b.isAlive()).as("B runs: %s", lines(logB)).isTrue();
                Thread.sleep(5);
            }
            // the test holds one GPU, so A's first try is refused and A must wait
            Allocation held = test.allocate(GpuRequest.builder().owner("test").count(1).build(), Duration.ofMinutes(1));
            a = child("wait", dir, yaml, logA, stopA, 2);
            awaitTicketOf(a, logA, dir);
            long mark = lastSequence(dir.resolve("ledger"));
            assertThat(test.release(held.id())).isTrue();
            while (lines(logA).stream().noneMatch(l -> l.startsWith("G ") || l.startsWith("T "))) {
                assertThat(a.isAlive()).as("A runs: %s", lines(logA)).isTrue();
                assertThat(b.isAlive()).as("B runs").isTrue();
                Thread.sleep(5);
            }
            String grant = lines(logA).stream().filter(l -> l.startsWith("G ") || l.startsWith("T ")).findFirst()
                    .orElseThrow();
            assertThat(grant).as("A got both GPUs").startsWith("G ");
            long granted = seq(grant.substring(2));
            List<Long> bAllocsBetween = lines(logB).stream().filter(l -> l.startsWith("A "))
                    .map(l -> seq(l.substring(2))).filter(s -> s > mark && s < granted).toList();
            assertThat(bAllocsBetween).as("B was granted nothing between A's wait (ledger sequence %d) and A's grant"
                    + " (sequence %d)", mark, granted).isEmpty();
            assertThat(granted).as("between A's wait and its grant the ledger holds at most B's one release and the"
                    + " test's release").isLessThanOrEqualTo(mark + 3);
            // B kept trying meanwhile (it was refused, not stopped) and works again once A releases
            Files.createFile(stopA);
            assertThat(a.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(a.exitValue()).isZero();
            long bAfter = count(logB, "A ");
            while (count(logB, "A ") < bAfter + 5) {
                assertThat(b.isAlive()).as("B runs: %s", lines(logB)).isTrue();
                Thread.sleep(5);
            }
            assertThat(count(logB, "X")).as("B was refused while A waited").isPositive();
            Files.createFile(stop);
            assertThat(b.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(b.exitValue()).as("B: %s", Files.readString(tmp.resolve("b.log.out"))).isZero();
            assertThat(tickets(dir)).as("no ticket is left behind").isEmpty();
        } finally {
            for (Process p : new Process[]{a, b}) {
                if (p != null) {
                    p.destroyForcibly();
                }
            }
        }
    }

    /**
     * Three processes: A waits for both GPUs, B allocates and releases one GPU without waiting, C does the same but
     * waiting. Once A waits, B is granted nothing and C at most the one ticket it took before A, until A is served;
     * both work again once A released.
     */
    @Test
    @Timeout(value = 3, unit = TimeUnit.MINUTES)
    void neitherAnotherProcessLoopNorItsWaitersOvertakeAnEarlierWaiter(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path yaml = tmp.resolve("two.yaml");
        Files.writeString(yaml, TWO_GPUS);
        Path stop = tmp.resolve("stop");
        Path stopA = tmp.resolve("stopA");
        Path logA = tmp.resolve("a.log");
        Path logB = tmp.resolve("b.log");
        Path logC = tmp.resolve("c.log");
        List<Process> all = new ArrayList<>();
        try (GpuScheduler test = scheduler(dir, yaml)) {
            Process b = child("loop", dir, yaml, logB, stop, 1);
            all.add(b);
            Process c = child("waitloop", dir, yaml, logC, stop, 1);
            all.add(c);
            while (count(logB, "A ") < 10 || count(logC, "A ") < 10) {
                assertThat(b.isAlive() && c.isAlive()).as("B and C run: %s %s", lines(logB), lines(logC)).isTrue();
                Thread.sleep(5);
            }
            Allocation held = test.allocate(GpuRequest.builder().owner("test").count(1).build(), Duration.ofMinutes(1));
            Process a = child("wait", dir, yaml, logA, stopA, 2);
            all.add(a);
            awaitTicketOf(a, logA, dir);
            long mark = lastSequence(dir.resolve("ledger"));
            assertThat(test.release(held.id())).isTrue();
            while (lines(logA).stream().noneMatch(l -> l.startsWith("G ") || l.startsWith("T "))) {
                assertThat(a.isAlive()).as("A runs: %s", lines(logA)).isTrue();
                Thread.sleep(5);
            }
            String grant = lines(logA).stream().filter(l -> l.startsWith("G ") || l.startsWith("T ")).findFirst()
                    .orElseThrow();
            assertThat(grant).as("A got both GPUs").startsWith("G ");
            long granted = seq(grant.substring(2));
            // B never waits, so it holds no ticket: nothing for B while A queues. C's looping waiter may hold a
            // ticket taken before A's (it queued while B held the GPU): FIFO serves that one first, once; its next
            // waiter queues behind A.
            assertThat(grantsBetween(logB, mark, granted))
                    .as("b.log granted nothing between A's wait (sequence %d) and A's grant (%d)", mark, granted)
                    .isEmpty();
            assertThat(grantsBetween(logC, mark, granted))
                    .as("c.log granted at most its one earlier ticket between A's wait (%d) and A's grant (%d)", mark,
                            granted)
                    .hasSizeLessThanOrEqualTo(1);
            // after the mark: the test's release, at most B's release of a GPU it held then, at most C's grant and
            // release, then A's grant
            assertThat(granted).isLessThanOrEqualTo(mark + 5);
            Files.createFile(stopA);
            assertThat(a.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(a.exitValue()).isZero();
            long bAfter = count(logB, "A ");
            long cAfter = count(logC, "A ");
            while (count(logB, "A ") < bAfter + 3 || count(logC, "A ") < cAfter + 3) {
                assertThat(b.isAlive() && c.isAlive()).as("B and C run").isTrue();
                Thread.sleep(5);
            }
            Files.createFile(stop);
            for (Process p : List.of(b, c)) {
                assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
                assertThat(p.exitValue()).isZero();
            }
            assertThat(lines(logC)).as("C's waits never ran out").noneMatch(l -> l.startsWith("X"));
            assertThat(tickets(dir)).as("no ticket is left behind").isEmpty();
        } finally {
            all.forEach(Process::destroyForcibly);
        }
    }

    /**
     * The oldest waiter is killed with SIGKILL: its ticket is left in the directory, but the next waiter is served
     * once GPUs are free and the dead ticket is removed.
     */
    @Test
    @Timeout(value = 3, unit = TimeUnit.MINUTES)
    void aKilledOldestWaiterDoesNotBlockTheOthers(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path yaml = tmp.resolve("two.yaml");
        Files.writeString(yaml, TWO_GPUS);
        Path stop = tmp.resolve("stop");
        Path logK = tmp.resolve("k.log");
        Path logA = tmp.resolve("a.log");
        Process k = null;
        Process a = null;
        try (GpuScheduler test = scheduler(dir, yaml)) {
            Allocation held = test.allocate(GpuRequest.builder().owner("test").count(1).build());
            k = child("wait", dir, yaml, logK, stop, 2);
            awaitTicketOf(k, logK, dir);
            a = child("wait", dir, yaml, logA, stop, 2);
            awaitTicketOf(a, logA, dir);
            List<String> both = tickets(dir);
            assertThat(both).hasSize(2);
            assertThat(both.get(0)).as("K's ticket is the oldest").contains("-" + pid(logK) + "-");
            k.destroyForcibly();
            assertThat(k.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(k.exitValue()).as("K was killed by SIGKILL").isEqualTo(137);
            // K's ticket stays until someone judges the queue (A may already have: K's death changes what A polls)
            assertThat(test.tryAllocate(GpuRequest.builder().owner("test").count(1).build()))
                    .as("A waits for 2 GPUs: nothing else is handed out meanwhile, though one GPU is free").isEmpty();
            assertThat(test.release(held.id())).isTrue();
            while (lines(logA).stream().noneMatch(l -> l.startsWith("G ") || l.startsWith("T "))) {
                assertThat(a.isAlive()).as("A runs: %s", lines(logA)).isTrue();
                Thread.sleep(5);
            }
            assertThat(lines(logA)).anyMatch(l -> l.startsWith("G "));
            assertThat(tickets(dir)).as("the dead ticket was removed, A's too").isEmpty();
            Files.createFile(stop);
            assertThat(a.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(a.exitValue()).isZero();
            assertThat(test.tryAllocate(GpuRequest.builder().owner("test").count(2).build()))
                    .as("the node is free again").isPresent();
        } finally {
            for (Process p : new Process[]{k, a}) {
                if (p != null) {
                    p.destroyForcibly();
                }
            }
        }
    }

    /**
     * In one process with a node ledger, waiters are still served first come, first served (a waiter for one GPU
     * does not overtake an earlier waiter for two), and a non-waiting allocation does not overtake them either.
     */
    @Test
    @Timeout(value = 2, unit = TimeUnit.MINUTES)
    void inOneProcessWaitersAreServedInOrder(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path yaml = tmp.resolve("two.yaml");
        Files.writeString(yaml, TWO_GPUS);
        try (GpuScheduler s = scheduler(dir, yaml)) {
            DefaultGpuScheduler d = (DefaultGpuScheduler) s;
            Allocation hold0 = s.allocate(GpuRequest.builder().owner("h").count(1).build());
            Allocation hold1 = s.allocate(GpuRequest.builder().owner("h").count(1).build());
            List<String> order = new CopyOnWriteArrayList<>();
            List<Thread> threads = new ArrayList<>();
            List<Allocation> got = new CopyOnWriteArrayList<>();
            int[] counts = {2, 1, 1};
            for (int i = 0; i < 3; i++) {
                int n = i;
                Thread t = new Thread(() -> {
                    try {
                        Allocation a = s.allocate(GpuRequest.builder().owner("w" + n).count(counts[n]).build(),
                                Duration.ofMinutes(2));
                        order.add("w" + n);
                        got.add(a);
                    } catch (Exception e) {
                        order.add("w" + n + " failed: " + e);
                    }
                });
                t.start();
                threads.add(t);
                while (d.waiting() < i + 1) {
                    Thread.sleep(1);
                }
            }
            while (tickets(dir).isEmpty()) {
                Thread.sleep(1);
            }
            assertThat(s.release(hold0.id())).isTrue();
            assertThat(s.tryAllocate(GpuRequest.builder().owner("x").count(1).build()))
                    .as("a GPU is free, but it is the first waiter's turn").isEmpty();
            assertThat(order).as("w1 needs one GPU and one is free, but w0 came first").isEmpty();
            assertThat(s.release(hold1.id())).isTrue();
            while (got.isEmpty()) {
                Thread.sleep(1);
            }
            assertThat(order).containsExactly("w0");
            s.release(got.get(0).id());
            for (Thread t : threads) {
                t.join();
            }
            // one release frees two GPUs for w1 and w2 together: which of their threads returns first is the
            // scheduler's business, not the queue's order
            assertThat(order).hasSize(3).startsWith("w0");
            assertThat(order.subList(1, 3)).containsExactlyInAnyOrder("w1", "w2");
            assertThat(tickets(dir)).isEmpty();
        }
    }
}
