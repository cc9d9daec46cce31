package io.gpusched.cuda.internal;

import com.sun.jna.Function;
import com.sun.jna.Memory;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The child process of {@link io.gpusched.cuda.CudaDeviceQuery}: loads the CUDA driver library named by its
 * argument and prints, one per line, {@code count N} (cuInit, cuDeviceGetCount) and {@code uuid GPU-...} for each
 * device (cuDeviceGet, cuDeviceGetUuid_v2 or cuDeviceGetUuid); {@code nolib <why>} when the library cannot be loaded,
 * {@code error <call> <code> <name>} when a call fails. It runs in its own process so that the driver's state (and a
 * crash in it) never reaches the caller's JVM, and with {@code CUDA_VISIBLE_DEVICES} as the caller sets it. Internal.
 */
public final class CudaDriverQueryMain {

    /** @return classes whose code sources the child JVM's class path needs: this one's and JNA's */
    public static List<Class<?>> classPathRoots() {
        return List.of(CudaDriverQueryMain.class, NativeLibrary.class);
    }

    private CudaDriverQueryMain() {
    }

    /** @param args the library: a path or a name for the dynamic loader ({@code libcuda.so.1}) */
    public static void main(String[] args) {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (args.length != 1) {
            out.println("error usage 0 one argument: the CUDA driver library");
            System.exit(2);
        }
        NativeLibrary lib;
        try {
            lib = NativeLibrary.getInstance(args[0]);
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            out.println("nolib " + oneLine(e.getMessage()));
            return;
        }
        try {
            int rc = call(lib, "cuInit", 0);
            if (rc != 0) {
                out.println("error cuInit " + rc + " " + errorName(lib, rc));
                return;
            }
            IntByReference n = new IntByReference();
            rc = call(lib, "cuDeviceGetCount", n);
            if (rc != 0) {
                out.println("error cuDeviceGetCount " + rc + " " + errorName(lib, rc));
                return;
            }
            out.println("count " + n.getValue());
            Function getUuid = uuidFunction(lib);
            for (int i = 0; i < n.getValue(); i++) {
                IntByReference dev = new IntByReference();
                rc = call(lib, "cuDeviceGet", dev, i);
                if (rc != 0) {
                    out.println("error cuDeviceGet " + rc + " " + errorName(lib, rc));
                    return;
                }
                Memory uuid = new Memory(16);
                uuid.clear();
                rc = getUuid.invokeInt(new Object[]{uuid, dev.getValue()});
                if (rc != 0) {
                    out.println("error " + getUuid.getName() + " " + rc + " " + errorName(lib, rc));
                    return;
                }
                out.println("uuid " + format(uuid.getByteArray(0, 16)));
            }
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            out.println("error call 0 " + oneLine(e.toString()));
        }
    }

    private static Function uuidFunction(NativeLibrary lib) {
        try {
            return lib.getFunction("cuDeviceGetUuid_v2");
        } catch (UnsatisfiedLinkError e) {
            return lib.getFunction("cuDeviceGetUuid");
        }
    }

    private static int call(NativeLibrary lib, String name, Object... args) {
        return lib.getFunction(name).invokeInt(args);
    }

    private static String errorName(NativeLibrary lib, int rc) {
        try {
            PointerByReference p = new PointerByReference();
            if (lib.getFunction("cuGetErrorName").invokeInt(new Object[]{rc, p}) == 0) {
                Pointer s = p.getValue();
                if (s != null) {
                    return oneLine(s.getString(0, "US-ASCII"));
                }
            }
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            // no name: the number says it
        }
        return "?";
    }

    /** @return a CUuuid's 16 bytes as NVML and nvidia-smi print a GPU's UUID: {@code GPU-8-4-4-4-12} hex */
    static String format(byte[] b) {
        StringBuilder s = new StringBuilder("GPU-");
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) {
                s.append('-');
            }
            s.append(String.format("%02x", b[i] & 0xff));
        }
        return s.toString();
    }

    private static String oneLine(String s) {
        String t = String.valueOf(s).replaceAll("[\\r\\n\\t]+", " ").strip();
        return t.length() > 400 ? t.substring(0, 400) + "..." : t;
    }
}
