package io.gpusched.core.adversarial.input;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.sim.NodeDescriptions;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code GpuConfig.load} and {@code NodeDescriptions.load} on files that are not plain files: a FIFO nobody writes
 * (must not block), {@code /dev/zero} (endless), a directory, a missing file, a dangling link, a file over 3 MiB,
 * non-UTF-8 bytes. Documented: GpuConfigException naming the file, nothing else, no hang (a daemon thread with a
 * generous bound detects one).
 */
@Tag("adversarial")
class HostileConfigFileTest {

    @TempDir
    Path tmp;

    private static Object outcome(Function<Path, ?> load, Path p) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(load.apply(p));
            } catch (Throwable e) {
                f.complete(e);
            }
        }, "hostile-load");
        t.setDaemon(true);
        t.start();
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            fail("no answer within 30 s (a hang) loading " + p);
            return null;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    private List<Path> hostileFiles() throws IOException {
        List<Path> l = new ArrayList<>();
        l.add(tmp.resolve("missing.yaml"));
        Path dir = Files.createDirectory(tmp.resolve("dir.yaml"));
        l.add(dir);
        Path dangling = tmp.resolve("dangling.yaml");
        Files.createSymbolicLink(dangling, tmp.resolve("nowhere"));
        l.add(dangling);
        Path big = tmp.resolve("big.yaml");
        Files.writeString(big, "# " + "x".repeat(4 * 1024 * 1024) + "\ngpu: {}\n");
        l.add(big);
        Path bytes = tmp.resolve("bytes.yaml");
        Files.write(bytes, new byte[]{'g', 'p', 'u', ':', ' ', (byte) 0xff, (byte) 0xfe, (byte) 0xc3, '\n'});
        l.add(bytes);
        Path utf16 = tmp.resolve("utf16.yaml");
        Files.write(utf16, "gpu:\n  enabled: false\n".getBytes(java.nio.charset.StandardCharsets.UTF_16));
        l.add(utf16);
        if (Files.exists(Path.of("/dev/zero"))) {
            l.add(Path.of("/dev/zero"));
            Path link = tmp.resolve("zero.yaml");
            Files.createSymbolicLink(link, Path.of("/dev/zero"));
            l.add(link);
        }
        return l;
    }

    private static void check(Function<Path, ?> load, Path p) {
        Object o = outcome(load, p);
        if (o instanceof Throwable e) {
            if (e.getClass() != GpuConfigException.class) {
                throw new AssertionError("loading " + p + ": expected GpuConfigException or a value, got " + e, e);
            }
            assertTrue(e.getMessage() != null && e.getMessage().contains(p.getFileName() == null ? "/"
                    : p.getFileName().toString()), "names the file: " + e.getMessage());
        }
    }

    @Test
    void gpuConfigLoadHostileFiles() throws IOException {
        for (Path p : hostileFiles()) {
            check(GpuConfig::load, p);
        }
    }

    @Test
    void nodeDescriptionsLoadHostileFiles() throws IOException {
        for (Path p : hostileFiles()) {
            check(NodeDescriptions::load, p);
        }
    }

    private static boolean mkfifo(Path p) {
        try {
            Process pr = new ProcessBuilder("mkfifo", p.toString()).redirectErrorStream(true).start();
            return pr.waitFor(10, TimeUnit.SECONDS) && pr.exitValue() == 0;
        } catch (IOException | InterruptedException e) {
            return false;
        }
    }

    @Test
    void fifoDoesNotBlock() {
        Path fifo = tmp.resolve("fifo.yaml");
        assumeTrue(mkfifo(fifo), "mkfifo not available");
        check(GpuConfig::load, fifo);
        Path fifo2 = tmp.resolve("fifo-node.yaml");
        assumeTrue(mkfifo(fifo2), "mkfifo not available");
        check(NodeDescriptions::load, fifo2);
    }
}
