package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A racing job: a child JVM inside the cgroup opens every fake GPU node in a tight loop while the fence is updated
 * hundreds of times (with revoke and fence again every 50 updates). Before each change the test publishes the nodes
 * permitted during it (old ∪ new, or host policy ∪ fence for fence and revoke), after it the new set; the child counts
 * opens that passed the device cgroup for a node outside what was published around the open. Breaches must be 0, and
 * the racer must have seen nodes both open and refused (it was not idle). Figures are printed as {@code RACER-FIGURES}.
 */
@Tag("cgroup")
class RacerTest {
    static final int UPDATES = Integer.getInteger("gpusched.racer.updates", 300);
    static final int CTL = 1 << 4;
    static final int ALL = 0b11111;

    @TempDir
    Path dir;
    CgroupBed bed;
    Process child;

    @AfterEach
    void tearDown() throws Exception {
        if (child != null) {
            child.destroyForcibly().waitFor();
        }
        if (bed != null) {
            bed.close();
        }
    }

    /** Where the racer runs, and what the host allowed there before any fence (bit i: nvidia i, bit 4: nvidiactl). */
    enum Setup {
        V1_DEFAULT_ALLOW(Mechanism.V1, false, null, ALL),
        V1_CONTAINER(Mechanism.V1, false, "c 195:255 rw", CTL),
        V1_CONTAINER_WILDCARD(Mechanism.V1, false, "c 195:* rwm", ALL),
        V1_STRICT(Mechanism.V1, true, "c 195:255 rw", CTL),
        V2(Mechanism.V2, false, null, ALL),
        V2_STRICT(Mechanism.V2, true, null, ALL);

        final Mechanism mechanism;
        final boolean strict;
        final String containerRule;
        final int host;

        Setup(Mechanism mechanism, boolean strict, String containerRule, int host) {
            this.mechanism = mechanism;
            this.strict = strict;
            this.containerRule = containerRule;
            this.host = host;
        }
    }

    /** The shared page and its publisher. */
    static final class Board {
        final MappedByteBuffer buf;
        int seq;

        Board(Path file, int initial) throws IOException {
            buf = IsolationChild.map(file);
            IsolationChild.INT.setVolatile(buf, IsolationChild.MASKS, initial);
            IsolationChild.INT.setVolatile(buf, IsolationChild.SEQ, 0);
        }

        /** Publishes the set permitted while a change is under way. */
        void during(int mask) {
            publish(mask | IsolationChild.DURING);
        }

        void publish(int mask) {
            IsolationChild.INT.setVolatile(buf, IsolationChild.MASKS + 4 * (seq + 1), mask | CTL);
            seq++;
            IsolationChild.INT.setVolatile(buf, IsolationChild.SEQ, seq);
        }

        int breaches() {
            return (int) IsolationChild.INT.getVolatile(buf, IsolationChild.BREACHES);
        }

        void awaitReady() throws InterruptedException {
            for (int i = 0; i < 6000 && (int) IsolationChild.INT.getVolatile(buf, IsolationChild.READY) == 0; i++) {
                Thread.sleep(10);
            }
            assertThat((int) IsolationChild.INT.getVolatile(buf, IsolationChild.READY)).as("racer started").isOne();
        }

        void stop() {
            IsolationChild.INT.setVolatile(buf, IsolationChild.STOP, 1);
        }
    }

    static int mask(Allocation a) {
        int m = CTL;
        for (GpuDevice d : a.devices()) {
            m |= 1 << d.index();
        }
        return m;
    }

    Path setUpCgroup(CgroupDeviceIsolator iso, Setup s) throws Exception {
        Path cg = bed.cgroup(CgroupBed.root(iso, s.mechanism));
        if (s.containerRule != null) {
            CgroupBed.write(cg, "devices.deny", "a");
            for (DeviceRule r : CgroupDeviceIsolator.DEFAULT_BASE_ALLOW) {
                CgroupBed.write(cg, "devices.allow", r.v1Line());
            }
            CgroupBed.write(cg, "devices.allow", s.containerRule);
        }
        return cg;
    }

    Board startRacer(Path cg, int initial) throws Exception {
        Path shared = dir.resolve("board");
        Board board = new Board(shared, initial);
        List<String> args = new ArrayList<>(List.of("racer", shared.toString(), cg.resolve("cgroup.procs").toString(),
                "--"));
        for (String n : bed.nodes) {
            args.add(bed.dev.resolve(n).toString());
        }
        child = new ProcessBuilder(IsolationChild.command(args.toArray(String[]::new)))
                .redirectErrorStream(true).start();
        board.awaitReady();
        return board;
    }

    String finish(Board board) throws Exception {
        board.stop();
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(child.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(child.exitValue()).as(out).isZero();
        return out.lines().filter(l -> l.startsWith("RACER") || l.startsWith("BREACH")).reduce("", (a, b) -> a + b
                + "\n").strip();
    }

    static long field(String racer, String name) {
        String line = racer.lines().filter(l -> l.startsWith("RACER")).findFirst().orElseThrow();
        String v = line.substring(line.indexOf(name + "=") + name.length() + 1).split(" ")[0];
        return Long.parseLong(v.split(",")[0]);
    }

    static long[] perNode(String racer, String name) {
        String line = racer.lines().filter(l -> l.startsWith("RACER")).findFirst().orElseThrow();
        String[] v = line.substring(line.indexOf(name + "=") + name.length() + 1).split(" ")[0].split(",");
        long[] out = new long[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = Long.parseLong(v[i]);
        }
        return out;
    }

    @ParameterizedTest
    @EnumSource(Setup.class)
    void issue12_aRacingJobNeverOpensAGpuOutsideOldUnionNew(Setup s) throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator.Builder b = bed.builder(s.mechanism);
        if (s.strict) {
            b.strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW);
        }
        CgroupDeviceIsolator iso = CgroupBed.usable(b.build(), s.mechanism);
        Path cg = setUpCgroup(iso, s);
        Random rnd = new Random(12);
        Allocation current = bed.gpus(1);
        Board board = startRacer(cg, s.host);
        board.during(s.host | mask(current));
        Fence f = bed.track(iso.fence(cg, current));
        board.publish(mask(current));
        int updates = 0;
        int cycles = 0;
        for (int i = 1; i <= UPDATES; i++) {
            Allocation next = pick(rnd, current);
            board.during(mask(current) | mask(next));
            f.update(next);
            board.publish(mask(next));
            current = next;
            updates++;
            if (i % 50 == 0) {
                board.during(mask(current) | s.host);
                f.revoke();
                board.publish(s.host);
                board.during(s.host | mask(current));
                f = bed.track(iso.fence(cg, current));
                board.publish(mask(current));
                cycles++;
            }
        }
        String racer = finish(board);
        long tried = field(racer, "tried");
        long breaches = field(racer, "breaches");
        long racing = field(racer, "during-a-change");
        System.out.println("RACER-FIGURES " + s + ": updates=" + updates + " revoke+fence cycles=" + cycles
                + " opens tried=" + tried + " (during a change: " + racing + ") breaches=" + breaches + " | "
                + racer.replace('\n', ' '));
        assertThat(breaches).as(racer).isZero();
        assertThat(racing).as("some opens raced a change: %s", racer).isPositive();
        long[] passed = perNode(racer, "passed");
        long[] refused = perNode(racer, "refused");
        for (int n = 0; n < 4; n++) {
            assertThat(passed[n]).as("the racer opened nvidia%d at some point: %s", n, racer).isPositive();
            assertThat(refused[n]).as("the racer was refused nvidia%d at some point: %s", n, racer).isPositive();
        }
    }

    /** A random next allocation of one or two GPUs, different from the current one. */
    Allocation pick(Random rnd, Allocation current) {
        while (true) {
            int a = rnd.nextInt(4);
            int c = rnd.nextInt(3) == 0 ? rnd.nextInt(4) : a;
            Allocation next = a == c ? bed.gpus(a) : bed.gpus(a, c);
            if (mask(next) != mask(current)) {
                return next;
            }
        }
    }

    /** The checker can fail: writing {@code a} to devices.allow (what the old update did) is caught as a breach. */
    @Test
    void theRacerCatchesAFenceThatPassesThroughAll() throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V1);
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V1));
        Allocation gpu1 = bed.gpus(1);
        Board board = startRacer(cg, ALL);
        board.publish(ALL);
        bed.track(iso.fence(cg, gpu1));
        board.publish(mask(gpu1));
        for (int i = 0;; i++) {
            try {
                CgroupBed.write(cg, "devices.allow", "a");
                break;
            } catch (IOException einval) {
                // EINVAL while the fence's probe cgroup is still going offline after its rmdir
                assertThat(i).as("writing a to devices.allow: %s", einval.getMessage()).isLessThan(500);
                Thread.sleep(10);
            }
        }
        for (int i = 0; i < 6000 && board.breaches() == 0; i++) {
            Thread.sleep(10);
        }
        String racer = finish(board);
        assertThat(field(racer, "breaches")).as(racer).isPositive();
    }
}
