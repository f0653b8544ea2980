import torch, itertools, sys
dev = torch.device("cuda")
print("m,n,k,dtype,ms,tflops")
Ms = [128, 512, 1024, 2048, 4096, 8192, 16384]
NKs = [(1024, 1024), (4096, 1024), (1024, 4096), (1536, 12288), (12288, 1536), (6144, 12288), (12288, 6144), (3072, 768), (768, 3072), (49152, 12288), (12288, 49152), (12288, 12288)]
for dtype in (torch.bfloat16,):
    for m in Ms:
        for n, k in NKs:
            a = torch.randn(m, k, device=dev, dtype=dtype); b = torch.randn(k, n, device=dev, dtype=dtype)
            for _ in range(3): a @ b
            torch.cuda.synchronize()
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            reps = 10
            s.record()
            for _ in range(reps): a @ b
            e.record(); torch.cuda.synchronize()
            ms = s.elapsed_time(e) / reps
            print(f"{m},{n},{k},bf16,{ms:.5f},{2*m*n*k/ms/1e9:.1f}", flush=True)
