package driver

import "testing"

func TestTorchJobKinds(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		job   bool
		name  string
		local bool
	}{
		{[]string{"python3", "train.py", "--epochs", "1"}, true, "torch-train", true},
		{[]string{"/usr/bin/python3.11", "-u", "examples/torch/train_ddp.py"}, true, "torch-train_ddp", true},
		{[]string{"python", "-m", "mypkg.train"}, true, "torch-mypkg.train", true},
		{[]string{"torchrun", "--nproc_per_node", "2", "train.py"}, true, "torch-train", false},
		{[]string{"python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"}, true, "torch-train", false},
		{[]string{"mpirun", "-np", "2", "python3", "train.py"}, true, "", false},
		{[]string{"mpirun", "-np", "2", "./solver"}, false, "", false},
		{[]string{"train", "--epochs", "1"}, false, "", false},
		{[]string{"bench", "allreduce"}, false, "", false},
	} {
		if got := torchJob(tc.args); got != tc.job {
			t.Errorf("torchJob(%q) = %v, want %v", tc.args, got, tc.job)
		}
		if got := torchName(tc.args); got != tc.name {
			t.Errorf("torchName(%q) = %q, want %q", tc.args, got, tc.name)
		}
	}
}
