package io.gpusched.isolation;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Generates a {@code BPF_PROG_TYPE_CGROUP_DEVICE} program from rules. Context {@code {u32 access_type; u32 major;
 * u32 minor}}: type = {@code access_type & 0xFFFF} (char 2, block 1), access = {@code access_type >> 16} (mknod 1,
 * read 2, write 4). One block per rule (type, access subset, major, minor; wildcards omit their test), first match
 * wins, the default verdict last; return 1 allows, 0 denies. The 32-bit field is read whole and masked.
 */
public final class BpfDeviceProgram {

    static final int LDX_W_MEM = 0x61;
    static final int MOV64_K = 0xb7;
    static final int MOV64_X = 0xbf;
    static final int AND64_K = 0x57;
    static final int RSH64_K = 0x77;
    static final int JNE_K = 0x55;
    static final int EXIT = 0x95;

    /** One eBPF instruction. */
    record Insn(int code, int dst, int src, int off, int imm) {
        @Override
        public String toString() {
            return String.format("%02x %d %d %d %d", code, dst, src, off, imm);
        }
    }

    private final List<Insn> insns;

    private BpfDeviceProgram(List<Insn> insns) {
        this.insns = List.copyOf(insns);
    }

    /**
     * @param rules        in order, first match wins
     * @param defaultAllow verdict when no rule matches (true: leave other devices to the host's policy)
     */
    public static BpfDeviceProgram of(List<DeviceRule> rules, boolean defaultAllow) {
        List<Insn> p = new ArrayList<>();
        p.add(new Insn(LDX_W_MEM, 2, 1, 0, 0)); // r2 = ctx->access_type
        p.add(new Insn(MOV64_X, 3, 2, 0, 0)); // r3 = r2
        p.add(new Insn(AND64_K, 3, 0, 0, 0xFFFF)); // r3 &= 0xFFFF      (type)
        p.add(new Insn(RSH64_K, 2, 0, 0, 16)); // r2 >>= 16         (access)
        p.add(new Insn(LDX_W_MEM, 4, 1, 4, 0)); // r4 = ctx->major
        p.add(new Insn(LDX_W_MEM, 5, 1, 8, 0)); // r5 = ctx->minor
        for (DeviceRule r : rules) {
            List<Insn> block = new ArrayList<>();
            List<Integer> jumps = new ArrayList<>();
            if (r.type() != 'a') {
                jumps.add(block.size());
                block.add(new Insn(JNE_K, 3, 0, 0, r.type() == 'c' ? 2 : 1));
            }
            if (r.accessBits() != 7) {
                block.add(new Insn(MOV64_X, 6, 2, 0, 0)); // r6 = access
                block.add(new Insn(AND64_K, 6, 0, 0, ~r.accessBits() & 7)); // r6 &= ~allowed
                jumps.add(block.size());
                block.add(new Insn(JNE_K, 6, 0, 0, 0)); // asked for more than the rule covers
            }
            if (r.major() != DeviceRule.ANY) {
                jumps.add(block.size());
                block.add(new Insn(JNE_K, 4, 0, 0, r.major()));
            }
            if (r.minor() != DeviceRule.ANY) {
                jumps.add(block.size());
                block.add(new Insn(JNE_K, 5, 0, 0, r.minor()));
            }
            block.add(new Insn(MOV64_K, 0, 0, 0, r.allow() ? 1 : 0));
            block.add(new Insn(EXIT, 0, 0, 0, 0));
            for (int j : jumps) {
                Insn i = block.get(j);
                block.set(j, new Insn(i.code(), i.dst(), i.src(), block.size() - j - 1, i.imm()));
            }
            p.addAll(block);
        }
        p.add(new Insn(MOV64_K, 0, 0, 0, defaultAllow ? 1 : 0));
        p.add(new Insn(EXIT, 0, 0, 0, 0));
        return new BpfDeviceProgram(p);
    }

    /** @return the number of instructions */
    public int length() {
        return insns.size();
    }

    /** @return the program in the kernel's {@code struct bpf_insn} encoding, little-endian, 8 bytes each */
    public byte[] bytes() {
        ByteBuffer b = ByteBuffer.allocate(insns.size() * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (Insn i : insns) {
            b.put((byte) i.code());
            b.put((byte) ((i.dst() & 0xF) | ((i.src() & 0xF) << 4)));
            b.putShort((short) i.off());
            b.putInt(i.imm());
        }
        return b.array();
    }

    /** @return one line per instruction: opcode, dst, src, offset, immediate */
    public List<String> listing() {
        return insns.stream().map(Insn::toString).toList();
    }

    /**
     * Runs the program on one access, as the kernel would: for golden tests and for explaining a fence.
     *
     * @param type   'c' or 'b'
     * @param access subset of "rwm" asked for
     * @return true if the program allows it
     */
    public boolean evaluate(char type, int major, int minor, String access) {
        long[] r = new long[11];
        int accessBits = (access.contains("m") ? 1 : 0) | (access.contains("r") ? 2 : 0) | (access.contains("w") ? 4
                : 0);
        int[] ctx = {(accessBits << 16) | (type == 'c' ? 2 : 1), major, minor};
        int pc = 0;
        while (true) {
            Insn i = insns.get(pc++);
            switch (i.code()) {
                case LDX_W_MEM -> r[i.dst()] = ctx[i.off() / 4] & 0xFFFFFFFFL;
                case MOV64_X -> r[i.dst()] = r[i.src()];
                case MOV64_K -> r[i.dst()] = i.imm();
                case AND64_K -> r[i.dst()] &= i.imm();
                case RSH64_K -> r[i.dst()] >>>= i.imm();
                case JNE_K -> pc += r[i.dst()] != (i.imm() & 0xFFFFFFFFL) ? i.off() : 0;
                case EXIT -> {
                    return r[0] == 1;
                }
                default -> throw new IllegalStateException("unknown opcode " + i.code());
            }
        }
    }

    /** @return a copy with one instruction the verifier rejects (a read of an uninitialized register): for tests */
    BpfDeviceProgram corrupted() {
        List<Insn> p = new ArrayList<>(insns);
        p.add(0, new Insn(MOV64_X, 0, 7, 0, 0));
        return new BpfDeviceProgram(p);
    }
}
