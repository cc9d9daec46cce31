package io.gpusched.service.adversarial.review10;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import java.util.List;
import java.util.Optional;

/**
 * A request that does not wait, made now: granted or refused, what was granted released on {@link #close} (the
 * reviews' fair-queue tests, which ask whether a request is served beside what waits in the queue).
 */
public final class Now implements AutoCloseable {
    /** what was granted; empty when refused */
    public final Optional<Allocation> granted;
    /** the refusal; null when granted */
    public final GpuAllocationException refused;
    private final NodeService s;
    private final Caller who;

    private Now(NodeService s, Caller who, Optional<Allocation> granted, GpuAllocationException refused) {
        this.s = s;
        this.who = who;
        this.granted = granted;
        this.refused = refused;
    }

    /** Asks for {@code flags} as {@code who}, without a wait. */
    public static Now ask(NodeService s, Caller who, String... flags) throws InterruptedException {
        return ask(s, who, GpuRequests.fromCliFlags(List.of(flags)));
    }

    /** Asks for {@code request} as {@code who}, without a wait. */
    public static Now ask(NodeService s, Caller who, GpuRequest request) throws InterruptedException {
        try {
            return new Now(s, who, Optional.of(s.allocate(who, request, Optional.empty(), () -> false)), null);
        } catch (GpuAllocationException e) {
            return new Now(s, who, Optional.empty(), e);
        }
    }

    /** @return the refusal's reason and message, for an assertion's description; null when granted */
    public String refusal() {
        return refused == null ? null : refused.reason() + " " + refused.getMessage();
    }

    @Override
    public void close() throws InterruptedException {
        if (granted.isPresent()) {
            s.release(who, granted.get().id());
        }
    }
}
