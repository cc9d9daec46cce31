package io.gpusched.core.adversarial.ledger;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;

/**
 * A child process for {@link LedgerKillTest}: allocates and releases on a state directory forever, printing what the
 * ledger acknowledged ({@code ACK id bound|detached}) and what it is about to release ({@code REL id}) and did release
 * ({@code DONE id}), each line flushed before the next step. Arguments: state dir, seed, bind (true/false).
 */
public final class KillChild {
    private KillChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        Random r = new Random(Long.parseLong(args[1]));
        boolean bind = Boolean.parseBoolean(args[2]);
        try (GpuScheduler s = GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build()) {
            System.out.println("READY");
            System.out.flush();
            Allocation held = null;
            while (true) {
                if (held == null) {
                    GpuRequest.Builder b = GpuRequest.builder().count(1).exclusive();
                    if (bind) {
                        b.holder(HolderProcess.current());
                    }
                    held = s.tryAllocate(b.build()).orElse(null);
                    if (held != null) {
                        System.out.println("ACK " + held.id() + " " + (bind ? "bound" : "detached"));
                        System.out.flush();
                    }
                } else if (r.nextBoolean()) {
                    System.out.println("REL " + held.id());
                    System.out.flush();
                    s.release(held.id());
                    System.out.println("DONE " + held.id());
                    System.out.flush();
                    held = null;
                } else {
                    s.renew(held.id(), Duration.ofHours(1));
                }
            }
        }
    }
}
