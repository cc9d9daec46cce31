package io.gpusched.server;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuScheduler;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;

/**
 * The console's meters, behind {@code /metrics}: per-GPU gauges under dcgm-exporter's names
 * ({@link DcgmMeterBinder}), the scheduler's counters and timings ({@link SchedulerMeterBinder}) and the event
 * stream's own gauges (clients, connections, drops, queued bytes), and the client limits' (connections open,
 * refusals by limit).
 */
final class ConsoleMeters implements AutoCloseable {
    /** The content type of a Prometheus text scrape. */
    static final String SCRAPE_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private final PrometheusMeterRegistry registry;
    private final SchedulerMeterBinder schedulerMeters;

    ConsoleMeters(GpuScheduler scheduler, String hostname, SseHub sse, ClientLimits limits) {
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config().namingConvention(DcgmMeterBinder.namingConvention());
        new DcgmMeterBinder(scheduler::devices, hostname).bindTo(registry);
        this.schedulerMeters = new SchedulerMeterBinder(scheduler);
        schedulerMeters.bindTo(registry);
        Gauge.builder("gpusched.console.event.clients", sse, SseHub::size)
                .description("Event-stream clients receiving events").register(registry);
        Gauge.builder("gpusched.console.event.connections", sse, SseHub::connections)
                .description("Event-stream connections held, slow clients dropped but still in a write included")
                .register(registry);
        FunctionCounter.builder("gpusched.console.event.dropped", sse, SseHub::dropped)
                .description("Slow event-stream clients dropped (queue over its bound or a write stalled)")
                .register(registry);
        Gauge.builder("gpusched.console.event.queued", sse, SseHub::queuedBytes).baseUnit("bytes")
                .description("Bytes queued for event-stream clients, summed over clients").register(registry);
        Gauge.builder("gpusched.console.connections", limits, ClientLimits::connections)
                .description("Connections open on TCP and the node socket, all clients together").register(registry);
        for (String limit : new String[]{"maxConnections", "maxConnectionsPerClient", "maxRequestsPerClient",
            "maxEventStreamsPerClient", "maxHeldRequests"}) {
            FunctionCounter.builder("gpusched.console.refused", limits, l -> l.refused().getOrDefault(limit, 0L))
                    .tag("limit", limit).description("Requests and connections refused by a client limit (429)")
                    .register(registry);
        }
    }

    /** @param event an allocation event, counted (refusals by reason, changes by type) */
    void onEvent(AllocationEvent event) {
        schedulerMeters.onEvent(event);
    }

    /** @param took how long one allocate through the console took, refused or not */
    void recordAllocate(Duration took) {
        schedulerMeters.recordAllocate(took);
    }

    /** @return every meter in Prometheus's text format */
    String scrape() {
        return registry.scrape();
    }

    PrometheusMeterRegistry registry() {
        return registry;
    }

    @Override
    public void close() {
        registry.close();
    }
}
