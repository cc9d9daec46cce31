package io.gpusched.slurm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * The host's cores in Slurm's abstract numbering, per NUMA node: what {@code Cores=} of {@code gres.conf} names.
 * Slurm numbers a node's cores 0, 1, … socket by socket, one number per physical core (hyperthreads share it), in
 * hwloc's logical order, which for Linux is the order of (package id, core id). A NUMA node's cores are those whose
 * CPUs {@code /sys/devices/system/node/nodeN/cpulist} names.
 *
 * @param coresByNuma abstract core indices per NUMA node
 * @param coreCount   cores of the host in all
 */
public record CpuLayout(SortedMap<Integer, SortedSet<Integer>> coresByNuma, int coreCount) {

    /** Copies the map; @throws IllegalArgumentException when a core index is outside {@code [0, coreCount)} */
    public CpuLayout {
        SortedMap<Integer, SortedSet<Integer>> copy = new TreeMap<>();
        for (Map.Entry<Integer, SortedSet<Integer>> e : coresByNuma.entrySet()) {
            for (int c : e.getValue()) {
                if (c < 0 || c >= coreCount) {
                    throw new IllegalArgumentException("core " + c + " of NUMA node " + e.getKey()
                            + " is outside 0.." + (coreCount - 1));
                }
            }
            copy.put(e.getKey(), Collections.unmodifiableSortedSet(new TreeSet<>(e.getValue())));
        }
        coresByNuma = Collections.unmodifiableSortedMap(copy);
    }

    /** @return a layout that knows no cores: gres.conf then has no {@code Cores=} */
    public static CpuLayout unknown() {
        return new CpuLayout(new TreeMap<>(), 0);
    }

    /**
     * A layout of {@code numaNodes} nodes with {@code coresPerNode} cores each, numbered node by node (a two-socket
     * machine with one NUMA node per socket). For tests and for describing a simulated node's host.
     */
    public static CpuLayout uniform(int numaNodes, int coresPerNode) {
        SortedMap<Integer, SortedSet<Integer>> m = new TreeMap<>();
        for (int n = 0; n < numaNodes; n++) {
            SortedSet<Integer> s = new TreeSet<>();
            for (int c = 0; c < coresPerNode; c++) {
                s.add(n * coresPerNode + c);
            }
            m.put(n, s);
        }
        return new CpuLayout(m, numaNodes * coresPerNode);
    }

    /** @return the cores of a NUMA node, if the layout has it */
    public Optional<SortedSet<Integer>> cores(int numaNode) {
        return Optional.ofNullable(coresByNuma.get(numaNode));
    }

    /**
     * Reads the layout from sysfs ({@code sysRoot} is {@code /sys}): online CPUs'
     * {@code topology/physical_package_id} and {@code core_id}, and the NUMA nodes' {@code cpulist}.
     *
     * @return the layout, or {@link #unknown()} when sysfs does not say
     */
    public static CpuLayout fromSysfs(Path sysRoot) {
        Path cpus = sysRoot.resolve("devices/system/cpu");
        SortedMap<Long, Integer> coreOf = new TreeMap<>();
        Map<Integer, Long> keyOfCpu = new TreeMap<>();
        try (Stream<Path> s = Files.list(cpus)) {
            for (Path p : s.filter(x -> x.getFileName().toString().matches("cpu[0-9]+")).toList()) {
                int cpu = Integer.parseInt(p.getFileName().toString().substring(3));
                Path topo = p.resolve("topology");
                if (!Files.isDirectory(topo)) {
                    continue; // offline
                }
                long pkg = Long.parseLong(Files.readString(topo.resolve("physical_package_id")).trim());
                long core = Long.parseLong(Files.readString(topo.resolve("core_id")).trim());
                long key = (pkg << 32) | (core & 0xffffffffL);
                coreOf.put(key, 0);
                keyOfCpu.put(cpu, key);
            }
        } catch (IOException | RuntimeException e) {
            return unknown();
        }
        int i = 0;
        for (Map.Entry<Long, Integer> e : coreOf.entrySet()) {
            e.setValue(i++);
        }
        SortedMap<Integer, SortedSet<Integer>> byNuma = new TreeMap<>();
        Path nodes = sysRoot.resolve("devices/system/node");
        try (Stream<Path> s = Files.list(nodes)) {
            for (Path p : s.filter(x -> x.getFileName().toString().matches("node[0-9]+")).toList()) {
                int node = Integer.parseInt(p.getFileName().toString().substring(4));
                SortedSet<Integer> cores = new TreeSet<>();
                for (int cpu : GresRecord.parseIntList(Files.readString(p.resolve("cpulist")).trim())) {
                    Long key = keyOfCpu.get(cpu);
                    if (key != null) {
                        cores.add(coreOf.get(key));
                    }
                }
                if (!cores.isEmpty()) {
                    byNuma.put(node, cores);
                }
            }
        } catch (IOException | RuntimeException e) {
            // no NUMA directory (a kernel without NUMA): one node with every core
            byNuma.clear();
        }
        if (byNuma.isEmpty() && !coreOf.isEmpty()) {
            SortedSet<Integer> all = new TreeSet<>(coreOf.values());
            byNuma.put(0, all);
        }
        return new CpuLayout(byNuma, coreOf.size());
    }

    /** @return a short description, e.g. {@code "2 NUMA nodes, 40 cores"} */
    public String describe() {
        if (coreCount == 0) {
            return "no CPU layout";
        }
        List<String> parts = new ArrayList<>();
        coresByNuma.forEach((n, c) -> parts.add("node " + n + ": " + GresRecord.formatIntList(c)));
        return coresByNuma.size() + " NUMA node" + (coresByNuma.size() == 1 ? "" : "s") + ", " + coreCount
                + " cores (" + String.join("; ", parts) + ")";
    }
}
