package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The read-only views of the node under {@code /api/v1}: {@code node}, {@code devices}, {@code topology},
 * {@code samples} (the sample history, {@code ?gpu=&window=}), {@code doctor} and {@code audit}. GET and HEAD only.
 */
final class NodeViewsHandler implements HttpHandler {
    static final String NODE = ConsoleServer.API + "/node";
    static final String DEVICES = ConsoleServer.API + "/devices";
    static final String TOPOLOGY = ConsoleServer.API + "/topology";
    static final String SAMPLES = ConsoleServer.API + "/samples";
    static final String DOCTOR = ConsoleServer.API + "/doctor";
    static final String AUDIT = ConsoleServer.API + "/audit";

    private final GpuScheduler scheduler;
    private final GpuInventory inventory;
    private final NodeWatcher watcher;
    private final SseHub sse;
    private final String hostname;
    private final Path stateDir;
    private final List<Path> cudaPaths;
    private final String version;

    NodeViewsHandler(GpuScheduler scheduler, NodeWatcher watcher, SseHub sse, String hostname, Path stateDir,
            List<Path> cudaPaths, String version) {
        this.scheduler = scheduler;
        this.inventory = scheduler.inventory();
        this.watcher = watcher;
        this.sse = sse;
        this.hostname = hostname;
        this.stateDir = stateDir;
        this.cudaPaths = List.copyOf(cudaPaths);
        this.version = version;
    }

    /** @return the paths served, in the order of the API document */
    static List<String> paths() {
        return List.of(NODE, DEVICES, TOPOLOGY, SAMPLES, DOCTOR, AUDIT);
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        Exchanges.get(ex, () -> {
            switch (path) {
                case NODE -> Exchanges.json(ex, 200, node());
                case DEVICES -> Exchanges.json(ex, 200, Views.devices(scheduler.devices(), scheduler.allocations()));
                case TOPOLOGY -> Exchanges.json(ex, 200, topology());
                case SAMPLES -> samples(ex);
                case DOCTOR -> Exchanges.json(ex, 200, DoctorReport.collect(cudaPaths, inventory));
                case AUDIT -> Exchanges.json(ex, 200, watcher.recentAudit());
                default -> Exchanges.error(ex, 404, "no such resource: " + path, null);
            }
        });
    }

    private Map<String, Object> node() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("hostname", hostname);
        m.put("backend", inventory.backend());
        m.put("simulated", inventory.backend().startsWith("simulated:"));
        m.put("gpus", inventory.devices().size());
        m.put("strategy", scheduler.strategy().name());
        m.put("stateDir", stateDir.toString());
        m.put("eventClients", sse.size());
        m.put("eventClientsDropped", sse.dropped());
        m.put("version", version);
        var status = scheduler.status();
        m.put("enabled", status.enabled());
        m.put("drainSupported", status.drainSupported());
        m.put("notes", status.notes());
        return m;
    }

    private Map<String, Object> topology() {
        var devices = inventory.devices();
        var t = inventory.topology();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("devices", devices.stream().map(d -> d.index()).toList());
        m.put("matrix", TopologyGrid.matrix(devices, t));
        List<Object> numa = new ArrayList<>();
        for (var d : devices) {
            numa.add(t.numaNode(d.index()).isPresent() ? t.numaNode(d.index()).getAsInt() : null);
        }
        m.put("numa", numa);
        m.put("legend", "X self; NV#/XG# NVLink/XGMI with # links; PIX one PCIe switch; PXB several; PHB host"
                + " bridge; NODE within a NUMA node; SYS across sockets");
        return m;
    }

    private void samples(HttpExchange ex) throws IOException {
        Map<String, String> q = Exchanges.query(ex, "gpu", "window");
        Optional<Integer> gpu = Optional.ofNullable(q.get("gpu")).map(g -> deviceIndex("gpu", g, inventory));
        Duration window = Optional.ofNullable(q.get("window")).map(NodeViewsHandler::parseWindow)
                .orElse(ConsoleServer.HISTORY);
        Exchanges.json(ex, 200, watcher.samples(gpu, window));
    }

    /**
     * @param name the query parameter {@code s} came in, for the error
     * @return a device index of this node, from ASCII digits only (no sign, no other Unicode digit, no space)
     * @throws Exchanges.BadQuery naming the parameter and this node's indices when it is not one
     */
    static int deviceIndex(String name, String s, GpuInventory inventory) {
        List<Integer> valid = inventory.devices().stream().map(d -> d.index()).sorted().toList();
        boolean digits = !s.isEmpty() && s.length() <= 10 && s.chars().allMatch(c -> c >= '0' && c <= '9');
        long n = digits ? Long.parseLong(s) : -1;
        if (!digits || n > Integer.MAX_VALUE || !valid.contains((int) n)) {
            throw new Exchanges.BadQuery(
                    name + "=" + SampleHistory.printable(s) + " is not a device index of this node;"
                            + " its GPUs are " + (valid.isEmpty() ? "none" : valid.toString()));
        }
        return (int) n;
    }

    private static Duration parseWindow(String s) {
        try {
            return SampleHistory.parseWindow(s);
        } catch (IllegalArgumentException e) {
            throw new Exchanges.BadQuery(e.getMessage());
        }
    }
}
