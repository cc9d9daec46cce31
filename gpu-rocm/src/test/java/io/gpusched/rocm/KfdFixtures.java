package io.gpusched.rocm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** KFD/DRM sysfs trees shaped like the captures in ../shared/fixtures/amd (values chosen here). */
final class KfdFixtures {
    /**
     * The real KFD captures (ROCm/k8s-device-plugin testdata), copied into this module with an INDEX.txt naming their
     * source: tests read them in any clone, with or without ../shared beside it.
     */
    static final Path CAPTURES = Path.of("src/test/resources/fixtures/amd/k8s-device-plugin/testdata");

    private KfdFixtures() {
    }

    static Path nodes(Path sys) {
        return sys.resolve("class/kfd/kfd/topology/nodes");
    }

    static void cpu(Path sys, int id) throws IOException {
        Path n = Files.createDirectories(nodes(sys).resolve(String.valueOf(id)));
        Files.writeString(n.resolve("properties"), "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
                + "io_links_count 1\nlocation_id 0\ndomain 0\ndrm_render_minor 0\nhive_id 0\nunique_id 0\n");
        Files.writeString(n.resolve("gpu_id"), "0\n");
        Files.createDirectories(n.resolve("io_links"));
    }

    /** A GPU node; links are "type:to" pairs. */
    static Path gpu(Path sys, int id, long locationId, int render, String unique, String hive, long gfx,
            long bankBytes, String... links) throws IOException {
        Path n = Files.createDirectories(nodes(sys).resolve(String.valueOf(id)));
        Files.writeString(n.resolve("properties"), "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 1\n"
                + "io_links_count " + links.length + "\ngfx_target_version " + gfx + "\nvendor_id 4098\n"
                + "device_id 29711\nlocation_id " + locationId + "\ndomain 0\ndrm_render_minor " + render + "\n"
                + "hive_id " + hive + "\nlocal_mem_size 0\nunique_id " + unique + "\nnum_xcc 1\nsome_future_key 7\n");
        Files.writeString(n.resolve("gpu_id"), String.valueOf(1000 + id) + "\n");
        Files.createDirectories(n.resolve("io_links"));
        Path bank = Files.createDirectories(n.resolve("mem_banks/0"));
        Files.writeString(bank.resolve("properties"), "heap_type 1\nsize_in_bytes " + bankBytes + "\nflags 0\n");
        for (int i = 0; i < links.length; i++) {
            String[] tl = links[i].split(":");
            Path l = Files.createDirectories(n.resolve("io_links/" + i));
            Files.writeString(l.resolve("properties"), "type " + tl[0] + "\nversion_major 0\nnode_from " + id
                    + "\nnode_to " + tl[1] + "\nweight 15\n");
        }
        return n;
    }

    /** 8x MI210 in two XGMI hives; KFD node order is not PCI order (bus 63, 43, 03, 26 | E3, C3, 83, A3). */
    static Path mi210(Path sys) throws IOException {
        cpu(sys, 0);
        cpu(sys, 1);
        long[] loc = {0x6300, 0x4300, 0x0300, 0x2600, 0xE300, 0xC300, 0x8300, 0xA300};
        String[] unique = {"1801979520617338022", "5847760019078012339", "10645161697164847644",
            "4847253685048710349", "12585367064092601175", "11779194899033552202", "17888023871577450191",
            "14073402507705256557"};
        for (int i = 0; i < 8; i++) {
            int node = 2 + i;
            int hiveBase = i < 4 ? 2 : 6;
            String cpuLink = "2:" + (i < 4 ? 0 : 1);
            String[] links = new String[4];
            links[0] = cpuLink;
            int k = 1;
            for (int j = hiveBase; j < hiveBase + 4; j++) {
                if (j != node) {
                    links[k++] = "11:" + j;
                }
            }
            gpu(sys, node, loc[i], 128 + i, unique[i], i < 4 ? "12609507387757274807" : "18091350218769748594",
                    90010, 64L << 30, links);
        }
        return sys;
    }

    /** 2 physical MI308X in CPX mode, 4 partitions each (location_id low bits = partition), one hive. */
    static Path cpx(Path sys) throws IOException {
        cpu(sys, 0);
        int node = 1;
        long[] bus = {0x0A, 0x8A};
        for (int g = 0; g < 2; g++) {
            for (int p = 0; p < 4; p++) {
                gpu(sys, node, (bus[g] << 8) | p, 128 + 8 * g + p, String.valueOf(598046273873802902L + g),
                        "2095653680343411291", 90402, 48L << 30, "2:0", "11:" + (g == 0 ? 5 + p : 1 + p));
                node++;
            }
        }
        return sys;
    }

    /** A DRM device dir with metrics for render minor {@code render}. */
    static void drm(Path sys, int render, String busy, String vramUsed, boolean edge, String powerAverageMicroW)
            throws IOException {
        Path d = Files.createDirectories(sys.resolve("class/drm/renderD" + render + "/device"));
        if (busy != null) {
            Files.writeString(d.resolve("gpu_busy_percent"), busy + "\n");
        }
        if (vramUsed != null) {
            Files.writeString(d.resolve("mem_info_vram_used"), vramUsed + "\n");
        }
        Path h = Files.createDirectories(d.resolve("hwmon/hwmon3"));
        Files.writeString(h.resolve("temp1_input"), "71000\n");
        Files.writeString(h.resolve("temp1_label"), "junction\n");
        if (edge) {
            Files.writeString(h.resolve("temp2_input"), "52000\n");
            Files.writeString(h.resolve("temp2_label"), "edge\n");
        }
        if (powerAverageMicroW != null) {
            Files.writeString(h.resolve("power1_average"), powerAverageMicroW + "\n");
        }
    }
}
