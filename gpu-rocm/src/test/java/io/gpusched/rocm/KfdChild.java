package io.gpusched.rocm;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Child JVM entry points, run inside {@link KfdNamespace} (the real /sys/class/kfd path shows a test tree):
 * <ul>
 *   <li>{@code provider <kfdCheck> <childProbe>}: the rocm-smi provider's unavailability cause with the real library;</li>
 *   <li>{@code detect}: {@code GpuInventories.detect()};</li>
 *   <li>{@code mutate <tree> <mutations> <from> <bareProbe|-> [<to>]}: applies each mutation from index {@code from}
 *       up to {@code to} (exclusive; default: the end of the list) in turn to the tree (seen at
 *       /sys/class/kfd/kfd/topology), asks the provider (KFD check on, child probe off: the library runs in this JVM
 *       whenever the check passes), restores the tree. A refused mutation is also run through the bare library in a
 *       C child to learn whether the refusal was needed. One line per step, so an abort names its mutation.</li>
 * </ul>
 */
public final class KfdChild {
    private KfdChild() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "provider" -> {
                RocmSmiInventoryProvider p = new RocmSmiInventoryProvider(Optional.of(KfdNamespace.REAL_LIBRARY),
                        Path.of("/sys"), Path.of("/dev"), true,
                        new RocmSmiInventory.Guard(Boolean.parseBoolean(args[1]), Boolean.parseBoolean(args[2])));
                System.out.println("cause: " + p.unavailabilityCause().orElse("<available>"));
            }
            case "detect" -> {
                try (GpuInventory inv = GpuInventories.detect()) {
                    System.out.println("detected: " + inv.backend() + " " + inv.devices().size());
                } catch (BackendUnavailableException e) {
                    System.out.println("detected: none: " + e.getMessage());
                }
            }
            case "mutate" -> mutate(Path.of(args[1]), Files.readAllLines(Path.of(args[2])), Integer.parseInt(args[3]),
                    args[4].equals("-") ? Optional.empty() : Optional.of(Path.of(args[4])),
                    args.length > 5 ? Integer.parseInt(args[5]) : Integer.MAX_VALUE);
            default -> throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
    }

    private static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static void mutate(Path tree, List<String> mutations, int from, Optional<Path> bare, int to) throws Exception {
        Path backup = Files.createTempDirectory("kfd-mutation-backup");
        for (int i = from; i < Math.min(to, mutations.size()); i++) {
            Mutation m = Mutation.parse(mutations.get(i));
            say("begin " + i);
            m.apply(tree, backup);
            Optional<String> unsafe = KfdSanity.problem(Path.of("/sys"));
            if (unsafe.isPresent()) {
                String rc = "-";
                if (bare.isPresent()) {
                    Process p = new ProcessBuilder(bare.get().toString()).redirectErrorStream(true)
                            .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                    if (!p.waitFor(60, TimeUnit.SECONDS)) {
                        p.destroyForcibly().waitFor();
                        rc = "timeout";
                    } else {
                        rc = String.valueOf(p.exitValue());
                    }
                }
                say("refused " + i + " " + rc + " " + unsafe.get().replace('\n', ' '));
            } else {
                String what;
                try (GpuInventory inv = RocmSmiInventory.open(Optional.of(KfdNamespace.REAL_LIBRARY), Path.of("/sys"),
                        Path.of("/dev"), Clock.systemUTC(), true, new RocmSmiInventory.Guard(true, false))) {
                    what = "devices " + inv.devices().size();
                } catch (BackendUnavailableException e) {
                    what = e.getMessage().replace('\n', ' ');
                }
                say("served " + i + " " + what);
            }
            m.restore(tree, backup);
            say("end " + i);
        }
        say("done");
    }

    /** One mutation of one path of a tree: remove, empty, truncate, garble or blank a file; remove, empty or replace a directory by a file. */
    record Mutation(String kind, String path) {
        static final List<String> FILE_KINDS = List.of("remove", "empty", "truncate", "garble", "blank");
        static final List<String> DIR_KINDS = List.of("remove", "empty", "file");

        static Mutation parse(String line) {
            int tab = line.indexOf('\t');
            return new Mutation(line.substring(0, tab), line.substring(tab + 1));
        }

        String line() {
            return kind + "\t" + path;
        }

        /** @return every mutation of every entry under {@code root} whose relative path passes {@code filter} */
        static List<Mutation> all(Path root, java.util.function.Predicate<String> filter) throws IOException {
            List<Mutation> out = new ArrayList<>();
            try (Stream<Path> s = Files.walk(root)) {
                for (Path p : s.sorted().toList()) {
                    String rel = root.relativize(p).toString();
                    if (rel.isEmpty() || !filter.test(rel)) {
                        continue;
                    }
                    for (String k : Files.isDirectory(p) ? DIR_KINDS : FILE_KINDS) {
                        out.add(new Mutation(k, rel));
                    }
                }
            }
            return out;
        }

        void apply(Path root, Path backup) throws IOException {
            Path p = root.resolve(path);
            deleteTree(backup.resolve("x"));
            KfdNamespace.copy(p, backup.resolve("x"));
            if (Files.isDirectory(p)) {
                switch (kind) {
                    case "remove" -> deleteTree(p);
                    case "empty" -> {
                        try (Stream<Path> s = Files.list(p)) {
                            for (Path c : s.toList()) {
                                deleteTree(c);
                            }
                        }
                    }
                    case "file" -> {
                        deleteTree(p);
                        Files.writeString(p, "garbage\n");
                    }
                    default -> throw new IllegalArgumentException(kind);
                }
            } else {
                byte[] b = Files.readAllBytes(p);
                switch (kind) {
                    case "remove" -> Files.delete(p);
                    case "empty" -> Files.write(p, new byte[0]);
                    case "truncate" -> Files.write(p, java.util.Arrays.copyOf(b, b.length / 2));
                    case "garble" -> Files.write(p, garble(b));
                    case "blank" -> Files.writeString(p, "\n");
                    default -> throw new IllegalArgumentException(kind);
                }
            }
        }

        /** Digits become letters, one line loses its value, one gets a 30-digit number, plus a binary line. */
        static byte[] garble(byte[] b) {
            String s = new String(b, StandardCharsets.ISO_8859_1);
            StringBuilder out = new StringBuilder();
            List<String> lines = s.lines().toList();
            for (int i = 0; i < lines.size(); i++) {
                String l = lines.get(i);
                out.append(switch (i % 3) {
                    case 0 -> l.replace('1', 'l').replace('0', 'O');
                    case 1 -> l.contains(" ") ? l.substring(0, l.indexOf(' ')) : l + " " + l;
                    default -> l.replaceAll("[0-9]+", "999999999999999999999999999999");
                }).append('\n');
            }
            out.append("\u0001\u00ff zz \t 12 34\n");
            return out.toString().getBytes(StandardCharsets.ISO_8859_1);
        }

        void restore(Path root, Path backup) throws IOException {
            Path p = root.resolve(path);
            deleteTree(p);
            KfdNamespace.copy(backup.resolve("x"), p);
        }
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(x);
            }
        }
    }
}
