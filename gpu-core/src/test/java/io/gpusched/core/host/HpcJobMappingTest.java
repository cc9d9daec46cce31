package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * dcgm-exporter's HPC job-mapping directory as {@link HpcJobMapping} keeps it: one file per held GPU named as
 * dcgm-exporter reads them ({@code <gpu>}, {@code <gpu>.<gi>} for MIG), job ids one per line, files of released GPUs
 * removed, other files left alone, and every file replaced whole (a reader never sees part of one).
 */
class HpcJobMappingTest {
    @TempDir
    Path dir;

    static final Instant T = Instant.parse("2026-03-02T10:00:00Z");

    static GpuDevice gpu(int index) {
        return GpuDevice.builder().index(index).uuid("GPU-" + index).vendor(GpuVendor.NVIDIA).name("A100")
                .memory(MemorySize.ofGibibytes(80)).pciBusId(String.format("00000000:%02x:00.0", index + 1))
                .property("nvml.index", Integer.toString(index)).build();
    }

    static GpuDevice mig(int index, int parent, int gi) {
        return GpuDevice.builder().index(index).uuid("MIG-" + parent + "-" + gi).vendor(GpuVendor.NVIDIA)
                .name("A100 MIG 3g.40gb").memory(MemorySize.ofGibibytes(40)).pciBusId("00000000:01:00.0")
                .parentUuid("GPU-" + parent).property("nvml.index", Integer.toString(parent))
                .property("mig.gpu_instance_id", Integer.toString(gi)).build();
    }

    static Allocation alloc(String id, String job, GpuDevice... devices) {
        GpuRequest.Builder r = GpuRequest.builder().count(devices.length);
        if (job != null) {
            r.jobId(job);
        }
        return new Allocation(id, List.of(devices), r.build(), T);
    }

    private Map<String, String> files() throws IOException {
        Map<String, String> out = new TreeMap<>();
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                out.put(p.getFileName().toString(), Files.readString(p));
            }
        }
        return out;
    }

    @Test
    void oneFilePerHeldGpuWithItsJobsOnePerLine() throws IOException {
        HpcJobMapping m = HpcJobMapping.open(dir);
        Allocation a = alloc("a1-1", "4567", gpu(0), gpu(1));
        Allocation b = alloc("b2-7", null, gpu(1));
        Allocation c = alloc("c3-2", "train.x", mig(8, 2, 3));
        m.sync(List.of(a, b, c));
        assertThat(files()).isEqualTo(Map.of("0", "4567\n", "1", "4567\nb2-7\n", "2.3", "train.x\n"));
        assertThat(files().keySet()).allMatch(n -> HpcJobMapping.FILE_NAME.matcher(n).matches());
        assertThat(Files.getPosixFilePermissions(dir.resolve("1"))).isEqualTo(PosixFilePermissions.fromString(
                "rw-r--r--"));

        m.sync(List.of(b, c)); // a released
        assertThat(files()).isEqualTo(Map.of("1", "b2-7\n", "2.3", "train.x\n"));
        m.sync(List.of());
        assertThat(files()).isEmpty();
    }

    @Test
    void unchangedMappingIsNotRewritten() throws IOException {
        HpcJobMapping m = HpcJobMapping.open(dir);
        Allocation a = alloc("a1-1", "4567", gpu(0));
        m.sync(List.of(a));
        Object inode = Files.getAttribute(dir.resolve("0"), "unix:ino");
        m.sync(List.of(a));
        assertThat(Files.getAttribute(dir.resolve("0"), "unix:ino")).as("not replaced").isEqualTo(inode);
    }

    @Test
    void jobIdsThatAreNotPlainTokensAreReplacedByTheAllocationId() throws IOException {
        HpcJobMapping m = HpcJobMapping.open(dir);
        m.sync(List.of(alloc("x-1", "123\n456", gpu(0)), alloc("x-2", "../../etc", gpu(1)),
                alloc("x-3", "a b", gpu(2)), alloc("x-4", "slurm-99@node7:step.0", gpu(3))));
        assertThat(files()).isEqualTo(Map.of("0", "x-1\n", "1", "x-2\n", "2", "x-3\n", "3",
                "slurm-99@node7:step.0\n"));
    }

    @Test
    void leftoversOfAnEarlierRunAreRemovedAndOtherFilesLeftAlone() throws IOException {
        Files.writeString(dir.resolve("5"), "old-job\n");
        Files.writeString(dir.resolve("1.2"), "old-mig-job\n");
        Files.writeString(dir.resolve("README"), "dcgm-exporter reads this directory\n");
        Files.writeString(dir.resolve(".gpusched-jobmap-123.tmp"), "half");
        HpcJobMapping m = HpcJobMapping.open(dir);
        assertThat(files()).as("a killed writer's temporary file is gone").doesNotContainKey(
                ".gpusched-jobmap-123.tmp");
        m.sync(List.of(alloc("a", "1", gpu(0))));
        assertThat(files()).isEqualTo(Map.of("0", "1\n", "README", "dcgm-exporter reads this directory\n"));
    }

    @Test
    void devicesDcgmCannotNameGetNoFile() throws IOException {
        GpuDevice amd = GpuDevice.builder().index(0).uuid("GPU-amd").vendor(GpuVendor.AMD).name("MI210")
                .memory(MemorySize.ofGibibytes(64)).pciBusId("0000:03:00.0").build();
        GpuDevice migWithoutInstance = GpuDevice.builder().index(9).uuid("MIG-x").vendor(GpuVendor.NVIDIA)
                .name("MIG").memory(MemorySize.ofGibibytes(10)).pciBusId("00000000:01:00.0").parentUuid("GPU-0")
                .build();
        GpuDevice plain = GpuDevice.builder().index(4).uuid("GPU-plain").vendor(GpuVendor.NVIDIA).name("V100")
                .memory(MemorySize.ofGibibytes(32)).pciBusId("00000000:05:00.0").build();
        HpcJobMapping.open(dir).sync(List.of(alloc("a", "1", amd, migWithoutInstance, plain)));
        assertThat(files()).as("no nvml.index: the device index").isEqualTo(Map.of("4", "1\n"));
    }

    @Test
    void createsTheDirectoryWithMode0755() throws IOException {
        Path d = dir.resolve("run/gpusched/hpc-jobs");
        HpcJobMapping m = HpcJobMapping.open(d);
        assertThat(m.directory()).isEqualTo(d);
        assertThat(Files.getPosixFilePermissions(d)).isEqualTo(PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    @Test
    void aReaderNeverSeesPartOfAFile() throws Exception {
        HpcJobMapping m = HpcJobMapping.open(dir);
        List<Allocation> one = new ArrayList<>();
        List<Allocation> two = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            one.add(alloc("one-" + i, "job-one-" + i, gpu(0)));
            two.add(alloc("two-" + i, "job-two-" + i, gpu(0)));
        }
        m.sync(one);
        Set<String> valid = Set.of(HpcJobMapping.mappingOf(one).get("0"), HpcJobMapping.mappingOf(two).get("0"));
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        int[] reads = new int[1];
        Thread reader = new Thread(() -> {
            while (!stop.get()) {
                try {
                    String s = Files.readString(dir.resolve("0"));
                    reads[0]++;
                    if (!valid.contains(s)) {
                        bad.add(s);
                    }
                } catch (NoSuchFileException e) {
                    bad.add("<missing>");
                } catch (IOException e) {
                    bad.add(e.toString());
                }
            }
        });
        reader.start();
        for (int i = 0; i < 500; i++) {
            m.sync(i % 2 == 0 ? two : one);
        }
        stop.set(true);
        reader.join();
        assertThat(bad).as("torn, empty or missing reads among %d", reads[0]).isEmpty();
        assertThat(reads[0]).isPositive();
    }
}
