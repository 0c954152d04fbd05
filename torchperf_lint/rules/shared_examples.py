"""Real-code look-alikes that several rules must stay silent on, kept once so every rule's GOOD
examples (and the rule pages generated from them) show the same code."""

# A torch_geometric dataset's `process()` runs once, when the dataset is first built: its DataLoader,
# device moves and per-item loops are set-up, not a training step (TPL201, TPL501, TPL502).
FEATURE_EXTRACTION_IN_DATASET_PROCESS = """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader
            from torch_geometric.data import InMemoryDataset

            class Keypoints(InMemoryDataset):
                def process(self):
                    loader = DataLoader(self.images, batch_size=32)
                    device = torch.device("cuda")
                    features = []
                    for batch in loader:
                        out = F.interpolate(self.vgg(batch.to(device)), (256, 256))
                        for j in range(out.size(0)):
                            features.append(out[j].flatten())
                    torch.save(features, self.processed_paths[0])
            """
