package io.gpusched.rocm.adversarial;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes synthetic KFD trees ({@code <root>/class/kfd/kfd/topology/nodes/N/...}) for the adversarial tests. */
final class AdvTree {

    final Path root;

    AdvTree(Path root) {
        this.root = root;
        mkdirs(topology().resolve("nodes"));
        write(topology().resolve("generation_id"), "1\n");
        write(topology().resolve("system_properties"), "platform_oem 0\n");
    }

    Path topology() {
        return root.resolve("class/kfd/kfd/topology");
    }

    Path node(int id) {
        return topology().resolve("nodes").resolve(Integer.toString(id));
    }

    AdvTree cpu(int id) {
        mkdirs(node(id).resolve("io_links"));
        write(node(id).resolve("properties"), "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\nio_links_count 0\n"
                + "vendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\nlocal_mem_size 0\n");
        write(node(id).resolve("gpu_id"), "0\n");
        write(node(id).resolve("name"), "\n");
        return this;
    }

    /** Standard GPU properties for a node on {@code bus} (function bits = partition), render minor and unique id. */
    static String gpuProps(int bus, int fn, int minor, String uniqueId, String extra) {
        return "cpu_cores_count 0\nsimd_count 80\nmem_banks_count 1\ncaches_count 0\nio_links_count 1\n"
                + "gfx_target_version 90402\nvendor_id 4098\ndevice_id 29858\n"
                + "location_id " + ((bus << 8) | fn) + "\ndomain 0\ndrm_render_minor " + minor + "\n"
                + (uniqueId == null ? "" : "unique_id " + uniqueId + "\n")
                + "num_xcc 1\nlocal_mem_size 0\n" + extra;
    }

    AdvTree gpu(int id, String properties, long gpuId) {
        mkdirs(node(id).resolve("io_links"));
        write(node(id).resolve("properties"), properties);
        write(node(id).resolve("gpu_id"), gpuId + "\n");
        write(node(id).resolve("name"), "ip discovery\n");
        return this;
    }

    /** A GPU node with a 48 GiB bank, on its own bus, partition 0, with a PCIe link to CPU node 0. */
    AdvTree gpu(int id, int bus, int minor) {
        gpu(id, gpuProps(bus, 0, minor, Long.toString(1000L + id), ""), 40000L + id);
        bank(id, "size_in_bytes 51539607552\n");
        link(id, 0, 2, 0, 20);
        return this;
    }

    AdvTree bank(int id, String properties) {
        mkdirs(node(id).resolve("mem_banks/0"));
        write(node(id).resolve("mem_banks/0/properties"), "heap_type 1\n" + properties + "flags 0\nwidth 4096\n");
        return this;
    }

    AdvTree link(int from, int idx, long type, long to, String weight) {
        Path d = node(from).resolve("io_links").resolve(Integer.toString(idx));
        mkdirs(d);
        write(d.resolve("properties"), "type " + type + "\nversion_major 0\nversion_minor 0\nnode_from " + from
                + "\nnode_to " + to + "\nweight " + weight + "\nmin_latency 0\nmax_latency 0\nflags 1\n");
        return this;
    }

    AdvTree link(int from, int idx, long type, long to, long weight) {
        return link(from, idx, type, to, Long.toUnsignedString(weight));
    }

    static void mkdirs(Path p) {
        try {
            Files.createDirectories(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void write(Path p, String s) {
        try {
            Files.createDirectories(p.getParent());
            Files.write(p, s.getBytes(StandardCharsets.ISO_8859_1));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void run(String... cmd) {
        try {
            Process p = new ProcessBuilder(cmd).inheritIO().start();
            if (p.waitFor() != 0) {
                throw new IllegalStateException(String.join(" ", cmd) + " exited " + p.exitValue());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
