package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node ledger on a tiny tmpfs that fills up: a change whose append fails must leave everything a caller can see
 * exactly as before (the cached device snapshot included), fire no event, and cost no rate-limit token (the Reason
 * javadoc: "Only granted allocations spend tokens; refusals do not").
 */
@Tag("adversarial")
class FullDiskRollbackAttackTest {

    @TempDir
    Path tmp;

    private Path mountTmpfs(String opts) throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root to mount a tmpfs");
        Path m = tmp.resolve("fs");
        Files.createDirectories(m);
        Process p = new ProcessBuilder("mount", "-t", "tmpfs", "-o", opts, "tmpfs", m.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(p.waitFor() == 0, "mount tmpfs: " + out);
        return m;
    }

    private static List<Object> observable(GpuScheduler s) {
        var st = s.status();
        return List.of(s.devices(), s.allocations(), st.devices(), st.allocations(), st.notes());
    }

    @Test
    void aFailedAppendChangesNothingAndSpendsNoToken() throws Exception {
        Path m = mountTmpfs("size=64k,mode=0700");
        try {
            Node node = Node.uniform(8);
            Clock fixed = Clock.fixed(Instant.parse("2026-03-01T00:00:00Z"), ZoneOffset.UTC);
            int burst = 40;
            GpuConfig config = GpuConfig.builder().rateLimit(0.0001, burst).build();
            List<AllocationEvent> events = new CopyOnWriteArrayList<>();
            try (GpuScheduler s = GpuScheduler.builder().inventory(node).config(config).clock(fixed)
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).stateDir(m.resolve("state"))
                    .listener(events::add).build()) {
                GpuRequest one = GpuRequest.builder().count(1).owner("alice").build();
                int granted = 0;
                List<Allocation> held = new java.util.ArrayList<>();
                held.add(s.allocate(one));
                granted++;
                Path filler = m.resolve("filler");
                try (var out = Files.newOutputStream(filler)) {
                    byte[] chunk = new byte[256];
                    while (true) {
                        out.write(chunk);
                        out.flush();
                    }
                } catch (IOException full) {
                    // the disk is full
                }
                int noSpace = 0;
                for (int i = 0; i < 60 && noSpace < 4; i++) {
                    if (noSpace == 2) {
                        // a health change while the disk is full is local; the next failed change must keep it
                        node.change(3, GpuHealth.lost("fell off the bus"));
                        assertThat(s.devices().get(3).health().isHealthy()).isFalse();
                    }
                    List<Object> before = observable(s);
                    int eventsBefore = events.size();
                    try {
                        if (held.size() >= 4) {
                            s.release(held.get(0).id());
                            held.remove(0);
                        } else {
                            held.add(s.allocate(one));
                            granted++;
                        }
                    } catch (GpuAllocationException e) {
                        fail("refused (%s) after %d grants and %d failed appends of a burst of %d: the failed appends"
                                + " spent tokens", e.getMessage(), granted, noSpace, burst);
                    } catch (LedgerException e) {
                        assertThat(e.kind()).isEqualTo(LedgerException.Kind.NO_SPACE);
                        noSpace++;
                        assertThat(observable(s)).as("after a failed append").isEqualTo(before);
                        assertThat(events.subList(eventsBefore, events.size())).as("events of a failed change")
                                .isEmpty();
                    }
                }
                assertThat(noSpace).as("the disk filled up").isGreaterThan(0);
                Files.delete(filler);
                // tokens: burst - granted are left, whatever failed on the full disk
                int more = 0;
                while (true) {
                    try {
                        Allocation a = s.allocate(one);
                        s.release(a.id());
                        more++;
                    } catch (GpuAllocationException e) {
                        assertThat(e.reason()).as(e.getMessage()).isEqualTo(GpuAllocationException.Reason.RATE_LIMITED);
                        break;
                    }
                    if (more > burst) {
                        fail("the rate limit never applied");
                    }
                }
                assertThat(granted + more).as("grants before (%d) and after (%d) the disk was full; %d failed appends",
                        granted, more, noSpace).isEqualTo(burst);
                assertThat(events.stream().filter(ev -> ev.type() == AllocationEvent.Type.ALLOCATED).count())
                        .isEqualTo(granted + more);
            }
        } finally {
            new ProcessBuilder("umount", "-l", m.toString()).start().waitFor();
        }
    }
}
